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
//! context (the op's name is the engine's [`OpName`](crate::engine::OpName), recorded as it
//! is). The device table is process-wide and append-only (a device, once registered, keeps
//! its id), so the probe keeps the ids it looked up in a small table of its own, one atomic
//! slot per context (`DeviceSlots`: CPU and GPU ids below `SLOTS`), shared by every thread.
//! A slot is written once, so its line stays shared in every core's cache: an event costs
//! one relaxed load and the profiler's record, with no thread-local to find. The
//! process-wide table's lock is taken once per context (a thread that races another to fill
//! a slot looks it up too and stores the same id), and on every event of a context past the
//! slots.
//!
//! An op's `Finished` and the `Queued` of the ops its completion made ready come together
//! ([`EngineObserver::on_events_at_once`]: the engine reports them after its grants, before
//! any dispatch) and are recorded with one timestamp and one ring lookup
//! ([`Profiler::record_at_once`]): an op made ready by a completion costs two clock reads of
//! its own (start, end) rather than three.
#![forbid(unsafe_code)]

use super::event::{Event, EventKind};
use super::{DeviceId, OpInfo, Profiler};
use crate::device::identity::Device;
use crate::engine::{Context, DeviceType, EngineEvent, EngineObserver};
use crate::sync::{AtomicU32, Ordering};

/// Contexts of each device type whose profiler device a probe keeps in a slot.
const SLOTS: usize = 16;

/// A slot not filled yet (a filled one holds the device id plus one).
const EMPTY: u32 = 0;

/// The profiler devices of the contexts a probe has seen: a slot per CPU and GPU id below
/// [`SLOTS`], filled on first use.
struct DeviceSlots {
    cpu: [AtomicU32; SLOTS],
    gpu: [AtomicU32; SLOTS],
}

impl DeviceSlots {
    fn new() -> Self {
        DeviceSlots {
            cpu: std::array::from_fn(|_| AtomicU32::new(EMPTY)),
            gpu: std::array::from_fn(|_| AtomicU32::new(EMPTY)),
        }
    }

    /// The profiler device of engine context `ctx` (its typed [`Device`]).
    #[inline]
    fn device(&self, ctx: Context) -> DeviceId {
        let slots = match ctx.device {
            DeviceType::Cpu => &self.cpu,
            DeviceType::Gpu => &self.gpu,
        };
        let Some(slot) = slots.get(ctx.id as usize) else {
            return register_device(ctx);
        };
        // Relaxed: the slot's value is the whole message (an id is never replaced by another).
        match slot.load(Ordering::Relaxed) {
            EMPTY => {
                let id = register_device(ctx);
                slot.store(u32::from(id.id()) + 1, Ordering::Relaxed);
                id
            }
            filled => DeviceId::from_raw((filled - 1) as u16),
        }
    }
}

/// The process-wide id of `ctx`'s device (registered on first sight).
#[cold]
fn register_device(ctx: Context) -> DeviceId {
    let device = match ctx.device {
        DeviceType::Cpu => Device::Cpu(ctx.id),
        DeviceType::Gpu => Device::Gpu(ctx.id),
    };
    DeviceId::of(device)
}

/// The profiler event for engine event `event`, its timestamp not set yet.
#[inline]
fn to_event(devices: &DeviceSlots, event: EngineEvent) -> Event {
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
    Event::op(kind, devices.device(ctx), op, info).with_error(failed)
}

/// Records engine op events (queued, started, finished) into a [`Profiler`].
pub struct EngineProbe {
    profiler: Profiler,
    devices: DeviceSlots,
}

impl EngineProbe {
    /// A probe recording into `profiler`.
    pub fn new(profiler: &Profiler) -> Self {
        EngineProbe {
            profiler: profiler.clone(),
            devices: DeviceSlots::new(),
        }
    }
}

impl EngineObserver for EngineProbe {
    fn on_event(&self, event: EngineEvent) {
        if self.profiler.is_enabled() {
            self.profiler.record(to_event(&self.devices, event));
        }
    }

    /// One timestamp for them all (an op's end and its successors' queueing, one point of
    /// the engine's code): one clock read instead of one per event.
    fn on_events_at_once(&self, events: &[EngineEvent]) {
        if !self.profiler.is_enabled() {
            return;
        }
        let events = events.iter().map(|&event| to_event(&self.devices, event));
        self.profiler.record_at_once(events);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::engine::{FnProperty, OpName};

    #[test]
    fn slotted_ids_are_the_interned_ones() {
        let slots = DeviceSlots::new();
        let gpu = Context::gpu(3);
        assert_eq!(slots.device(gpu), DeviceId::register("gpu3"));
        assert_eq!(slots.device(gpu).device(), Some(Device::Gpu(3)));
        assert_eq!(slots.device(gpu), slots.device(gpu));
        assert_ne!(slots.device(gpu), slots.device(Context::cpu(0)));
        assert_eq!(slots.device(Context::cpu(0)).device(), Some(Device::Cpu(0)));
        // Past the slots: looked up every time, the same id.
        let far = Context::cpu(SLOTS as u32 + 1);
        assert_eq!(
            slots.device(far).device(),
            Some(Device::Cpu(SLOTS as u32 + 1))
        );
        assert_eq!(slots.device(far), slots.device(far));
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
