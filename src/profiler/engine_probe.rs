//! The engine's side of the profiler: an [`EngineObserver`] that turns the engine's op events
//! into profiler events on the op's device.
//!
//! # Op ids
//! The engine gives every op an id, unique in the process, carried by its `Queued`, `Started`
//! and `Finished` events (see [`EngineEvent`]). The probe records all three under that id, so
//! the Chrome export pairs an op's queueing with its start (a flow arrow) and its start with
//! its end, whichever threads they happen on.
//!
//! # Cost per event
//! Turning an engine event into a profiler event needs the profiler's device for the op's
//! context (the op's name is the engine's [`OpName`](crate::engine::OpName), recorded as it is). The device table is
//! process-wide and append-only (a device, once registered, keeps its id), so each thread
//! caches the contexts it looked up in a short list (a thread sees a handful), in one
//! thread-local. An event then costs one thread-local lookup and the profiler's record; the
//! table's lock is taken once per thread and context.
//!
//! An op's `Finished` and the `Queued` of the ops its completion made ready come together
//! ([`EngineObserver::on_events_at_once`]: the engine reports them after its grants, before
//! any dispatch) and are recorded with one timestamp and one ring lookup
//! ([`Profiler::record_at_once`]): an op made ready by a completion costs two clock reads of
//! its own (start, end) rather than three.
#![forbid(unsafe_code)]

use std::cell::RefCell;

use super::event::{Event, EventKind};
use super::{DeviceId, OpInfo, Profiler};
use crate::device::identity::Device;
use crate::engine::{Context, DeviceType, EngineEvent, EngineObserver};
use crate::sync::thread_local;

/// What this thread has looked up.
struct IdCache {
    /// Profiler devices of the contexts this thread has seen.
    devices: Vec<(Context, DeviceId)>,
}

impl IdCache {
    /// The profiler device of engine context `ctx` (its typed [`Device`]).
    fn device(&mut self, ctx: Context) -> DeviceId {
        match self.devices.iter().find(|(known, _)| *known == ctx) {
            Some(&(_, id)) => id,
            None => self.register_device(ctx),
        }
    }

    #[cold]
    fn register_device(&mut self, ctx: Context) -> DeviceId {
        let device = match ctx.device {
            DeviceType::Cpu => Device::Cpu(ctx.id),
            DeviceType::Gpu => Device::Gpu(ctx.id),
        };
        let id = DeviceId::of(device);
        self.devices.push((ctx, id));
        id
    }
}

/// Nothing looked up yet.
const NO_IDS: IdCache = IdCache {
    devices: Vec::new(),
};

// Thread-local: each recording thread caches the ids it interned, so an event takes no lock
// on the process-wide name and device tables.
#[cfg(not(loom))]
thread_local! {
    static IDS: RefCell<IdCache> = const { RefCell::new(NO_IDS) };
}

#[cfg(loom)]
thread_local! {
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static IDS: RefCell<IdCache> = RefCell::new(NO_IDS);
}

/// The profiler event for engine event `event`, its timestamp not set yet.
fn to_event(ids: &mut IdCache, event: EngineEvent) -> Event {
    let (kind, failed, id, op, ctx, prop, priority) = match event {
        EngineEvent::Queued {
            id,
            op,
            ctx,
            prop,
            priority,
        } => (EventKind::OpQueued, false, id, op, ctx, prop, priority),
        EngineEvent::Started {
            id,
            op,
            ctx,
            prop,
            priority,
        } => (EventKind::OpStart, false, id, op, ctx, prop, priority),
        EngineEvent::Finished {
            id,
            op,
            ctx,
            prop,
            priority,
            failed,
        } => (EventKind::OpEnd, failed, id, op, ctx, prop, priority),
    };
    let info = OpInfo::new(id).priority(priority).property(prop as u8);
    Event::op(kind, ids.device(ctx), op, info).with_error(failed)
}

/// Runs `convert` with this thread's id cache.
fn with_ids<R>(convert: impl FnOnce(&mut IdCache) -> R) -> R {
    IDS.with(|ids| convert(&mut ids.borrow_mut()))
}

/// Records engine op events (queued, started, finished) into a [`Profiler`].
pub struct EngineProbe {
    profiler: Profiler,
}

impl EngineProbe {
    /// A probe recording into `profiler`.
    pub fn new(profiler: &Profiler) -> Self {
        EngineProbe {
            profiler: profiler.clone(),
        }
    }
}

impl EngineObserver for EngineProbe {
    fn on_event(&self, event: EngineEvent) {
        if self.profiler.is_enabled() {
            self.profiler.record(with_ids(|ids| to_event(ids, event)));
        }
    }

    /// One timestamp for them all (an op's end and its successors' queueing, one point of
    /// the engine's code): one clock read instead of one per event.
    fn on_events_at_once(&self, events: &[EngineEvent]) {
        if !self.profiler.is_enabled() {
            return;
        }
        with_ids(|ids| {
            let events = events.iter().map(|&event| to_event(ids, event));
            self.profiler.record_at_once(events);
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::engine::{FnProperty, OpName};

    #[test]
    fn cached_ids_are_the_interned_ones() {
        let mut ids = NO_IDS;
        let gpu = Context::gpu(3);
        assert_eq!(ids.device(gpu), DeviceId::register("gpu3"));
        assert_eq!(ids.device(gpu).device(), Some(Device::Gpu(3)));
        assert_eq!(ids.device(gpu), ids.device(gpu));
        assert_ne!(ids.device(gpu), ids.device(Context::cpu(0)));
    }

    /// Ops that each spin for at least [`SPIN`] on a real engine: what the profiler's
    /// statistics say they did must hold what they did.
    const SPIN: std::time::Duration = std::time::Duration::from_micros(300);

    fn spin() -> crate::engine::OpResult {
        let start = std::time::Instant::now();
        while start.elapsed() < SPIN {
            std::hint::spin_loop();
        }
        Ok(())
    }

    /// The op table's counts and totals and each thread's ops and busy time, from a profiled
    /// engine, against the pushes and the spins: a lost start or end leaves an op out of
    /// its row, a swapped or mis-stamped pair gives it a duration shorter than its spin (or
    /// none), and either leaves a thread's busy time short of its ops' spins.
    #[test]
    fn a_profiled_engines_statistics_hold_what_its_ops_did() {
        use crate::engine::{Engine, EngineKind, EngineOptions, OpSpec};
        let profiler = Profiler::new(crate::profiler::ProfilerOptions::default()).unwrap();
        let probe = crate::sync::Arc::new(EngineProbe::new(&profiler));
        let options = EngineOptions::new(EngineKind::PerDevice, 2).observer(probe);
        let engine = Engine::new(options).unwrap();
        let vars: Vec<_> = (0..4).map(|_| engine.new_variable()).collect();
        let (names, ops) = (["exact-even", "exact-odd"], 40);
        let started = std::time::Instant::now();
        for k in 0..ops {
            let spec = OpSpec::new(names[k % 2]).writes(&vars[k % 4..k % 4 + 1]);
            engine.push_sync(spec, |_| spin()).unwrap();
        }
        engine.wait_for_all().unwrap();
        let wall = started.elapsed().as_nanos() as u64;
        profiler.flush();
        let snapshot = profiler.snapshot();
        // The ops spin on `Instant`, the profiler stamps with the calibrated counter, whose
        // rate may differ slightly from `Instant`'s: a span may read a little short of the
        // spin (a mis-stamped pair is off by far more).
        let spin_ns = SPIN.as_nanos() as u64 * 99 / 100;
        for name in names {
            let row = snapshot
                .op(name)
                .unwrap_or_else(|| panic!("no row for {name}"));
            assert_eq!(row.count, ops as u64 / 2, "{row:?}");
            assert!(
                row.min_ns >= spin_ns,
                "an op shorter than its spin: {row:?}"
            );
            assert!(row.total_ns >= row.count * spin_ns, "{row:?}");
            assert!(row.max_ns <= wall, "an op longer than the run: {row:?}");
        }
        let workers: Vec<_> = snapshot.workers.iter().filter(|w| w.ops > 0).collect();
        assert_eq!(workers.iter().map(|w| w.ops).sum::<u64>(), ops as u64);
        let mut all_busy = 0.0;
        for worker in workers {
            let busy = worker.shares_since_start.running * worker.lifetime_ns as f64;
            let spun = (worker.ops * spin_ns) as f64;
            assert!(
                busy >= spun * 0.999,
                "busy {busy} ns < {spun} ns spun: {worker:?}"
            );
            all_busy += busy;
        }
        // The engine's threads run nothing but these ops, one at a time each: their busy
        // time is their ops' durations, exactly (an op timed from its queueing would
        // overlap the op before it on its thread and count more than its thread was busy).
        let all_ops: u64 = names
            .iter()
            .map(|name| snapshot.op(name).unwrap().total_ns)
            .sum();
        let gap = (all_busy - all_ops as f64).abs();
        assert!(
            gap <= 1e-3 * all_busy,
            "ops {all_ops} ns vs busy {all_busy} ns"
        );
    }

    #[test]
    fn events_at_once_share_one_stamp_and_keep_their_order() {
        let profiler = Profiler::new(crate::profiler::ProfilerOptions::default()).unwrap();
        let probe = EngineProbe::new(&profiler);
        let (op, ctx, prop) = (
            OpName::new("probe-at-once"),
            Context::cpu(0),
            FnProperty::Normal,
        );
        let queued = |id| EngineEvent::Queued {
            id,
            op,
            ctx,
            prop,
            priority: 0,
        };
        probe.on_event(EngineEvent::Started {
            id: 1,
            op,
            ctx,
            prop,
            priority: 0,
        });
        let finished = EngineEvent::Finished {
            id: 1,
            op,
            ctx,
            prop,
            priority: 0,
            failed: true,
        };
        probe.on_events_at_once(&[finished, queued(2), queued(3)]);
        probe.on_event(queued(4));
        profiler.flush();
        let name = OpName::new("probe-at-once");
        let (window, ..) = profiler.core.as_ref().unwrap().window_events();
        let ours: Vec<&Event> = window.iter().filter(|event| event.name == name).collect();
        let kinds: Vec<(EventKind, u64)> = ours.iter().map(|e| (e.kind, e.op_id())).collect();
        use EventKind::{OpEnd, OpQueued, OpStart};
        let expected = [
            (OpStart, 1),
            (OpEnd, 1),
            (OpQueued, 2),
            (OpQueued, 3),
            (OpQueued, 4),
        ];
        assert_eq!(kinds, expected);
        assert!(ours[1].is_error());
        let stamps: Vec<u64> = ours.iter().map(|event| event.ts_ns).collect();
        assert!(stamps[0] <= stamps[1], "{stamps:?}");
        assert_eq!(
            (stamps[2], stamps[3]),
            (stamps[1], stamps[1]),
            "one stamp for the batch"
        );
        assert!(stamps[4] >= stamps[3], "{stamps:?}");
    }
}
