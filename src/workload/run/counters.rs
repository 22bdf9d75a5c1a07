//! What the op bodies count while a run goes: per lane (the worker pool that runs the op)
//! the ops finished and their busy time, and the FLOPs of all of them.
#![forbid(unsafe_code)]

use std::time::Duration;

pub(crate) use crate::device::identity::Lane;
use crate::engine::{Context, DeviceType};
use crate::engine::{EngineKind, FnProperty};
use crate::sync::{AtomicU64, Ordering};

impl Lane {
    /// Where `engine` runs an op on `device` with `property`.
    pub(super) fn of(engine: EngineKind, device: Context, property: FnProperty) -> Lane {
        match (engine, device.device) {
            (EngineKind::Naive, _) => Lane::Driver,
            (EngineKind::Pooled, _) if property.is_copy() => Lane::Io,
            (_, DeviceType::Gpu) => Lane::Gpu(device.id),
            (EngineKind::Pooled, DeviceType::Cpu) => Lane::SharedWorkers,
            (EngineKind::PerDevice, DeviceType::Cpu) if property == FnProperty::CpuPrioritized => {
                Lane::Priority
            }
            (EngineKind::PerDevice, DeviceType::Cpu) => Lane::CpuWorkers(device.id),
        }
    }
}

/// One lane's counts.
#[derive(Debug, Default)]
struct LaneCounters {
    ops: AtomicU64,
    busy_ns: AtomicU64,
}

/// Counts of a run, bumped by op bodies on any thread.
#[derive(Debug)]
pub(super) struct RunCounters {
    lanes: Vec<(Lane, LaneCounters)>,
    /// FLOPs of the finished ops, rounded to whole operations.
    flops: AtomicU64,
}

/// One lane's totals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LaneTotals {
    pub(super) lane: Lane,
    pub(super) ops: u64,
    pub(super) busy: Duration,
}

impl RunCounters {
    /// Counters for `lanes` (slot `i` is `lanes[i]`).
    pub(super) fn new(lanes: &[Lane]) -> Self {
        RunCounters {
            lanes: lanes
                .iter()
                .map(|lane| (*lane, LaneCounters::default()))
                .collect(),
            flops: AtomicU64::new(0),
        }
    }

    /// An op on lane slot `slot` finished after `busy` doing `flops`.
    pub(super) fn record(&self, slot: usize, busy: Duration, flops: f64) {
        let counters = &self.lanes[slot].1;
        counters.ops.fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(busy.as_nanos()).unwrap_or(u64::MAX);
        counters.busy_ns.fetch_add(nanos, Ordering::Relaxed);
        self.flops
            .fetch_add(flops.round() as u64, Ordering::Relaxed);
    }

    /// Back to zero (after the setup ops, before the timed iterations).
    pub(super) fn reset(&self) {
        for (_, counters) in &self.lanes {
            counters.ops.store(0, Ordering::Relaxed);
            counters.busy_ns.store(0, Ordering::Relaxed);
        }
        self.flops.store(0, Ordering::Relaxed);
    }

    /// FLOPs so far.
    pub(super) fn flops(&self) -> u64 {
        self.flops.load(Ordering::Relaxed)
    }

    /// Ops finished so far, every lane.
    pub(super) fn ops(&self) -> u64 {
        self.lanes
            .iter()
            .map(|(_, counters)| counters.ops.load(Ordering::Relaxed))
            .sum()
    }

    /// Every lane's totals, in slot order.
    pub(super) fn lanes(&self) -> Vec<LaneTotals> {
        self.lanes
            .iter()
            .map(|(lane, counters)| LaneTotals {
                lane: *lane,
                ops: counters.ops.load(Ordering::Relaxed),
                busy: Duration::from_nanos(counters.busy_ns.load(Ordering::Relaxed)),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_follow_the_engine_that_runs_the_op() {
        let cpu = Context::cpu(1);
        let prio = FnProperty::CpuPrioritized;
        assert_eq!(Lane::of(EngineKind::Naive, cpu, prio), Lane::Driver);
        assert_eq!(Lane::of(EngineKind::Pooled, cpu, prio), Lane::SharedWorkers);
        assert_eq!(Lane::of(EngineKind::PerDevice, cpu, prio), Lane::Priority);
        let normal = FnProperty::Normal;
        assert_eq!(
            Lane::of(EngineKind::PerDevice, cpu, normal),
            Lane::CpuWorkers(1)
        );
        let copy = FnProperty::CopyToGpu;
        assert_eq!(
            Lane::of(EngineKind::Pooled, Context::gpu(0), copy),
            Lane::Io
        );
        assert_eq!(
            Lane::of(EngineKind::PerDevice, Context::gpu(0), copy),
            Lane::Gpu(0)
        );
    }

    #[test]
    fn record_and_reset() {
        let counters = RunCounters::new(&[Lane::Driver, Lane::Priority]);
        counters.record(1, Duration::from_micros(3), 10.4);
        counters.record(1, Duration::from_micros(2), 0.0);
        let lanes = counters.lanes();
        assert_eq!((lanes[1].ops, lanes[1].busy), (2, Duration::from_micros(5)));
        assert_eq!((lanes[0].ops, counters.flops()), (0, 10));
        counters.reset();
        assert_eq!((counters.lanes()[1].ops, counters.flops()), (0, 0));
    }
}
