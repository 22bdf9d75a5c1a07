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
//! Turning an engine event into a profiler event needs the profiler's ids for the op's name
//! and its context. Both tables are process-wide and append-only (a name or device, once
//! interned, keeps its id), so each thread caches what it looked up, in one thread-local:
//! names in a vector indexed by the engine's name id, contexts in a short list (a thread sees
//! a handful). An event then costs one thread-local lookup and the profiler's record; the
//! interners' locks are taken once per thread and name or context.
#![forbid(unsafe_code)]

use std::cell::RefCell;

use super::event::{Event, EventKind};
use super::{DeviceId, NameId, OpInfo, Profiler};
use crate::engine::{Context, EngineEvent, EngineObserver, OpName};
use crate::sync::thread_local;

/// What this thread has looked up.
#[derive(Default)]
struct IdCache {
    /// Profiler name ids by engine name id, plus one (0: not looked up yet).
    names: Vec<u32>,
    /// Profiler devices of the contexts this thread has seen.
    devices: Vec<(Context, DeviceId)>,
}

impl IdCache {
    /// The profiler's id for op name `op` (interned on this thread's first sight of it).
    fn name(&mut self, op: OpName) -> NameId {
        let index = op.id() as usize;
        match self.names.get(index) {
            Some(&cached) if cached != 0 => NameId::from_raw(cached - 1),
            _ => self.intern_name(op),
        }
    }

    #[cold]
    fn intern_name(&mut self, op: OpName) -> NameId {
        let index = op.id() as usize;
        let name = NameId::intern(op.as_str());
        if self.names.len() <= index {
            self.names.resize(index + 1, 0);
        }
        self.names[index] = name.id() + 1;
        name
    }

    /// The profiler device of engine context `ctx` (registered as `cpu(0)`, `gpu(1)`...).
    fn device(&mut self, ctx: Context) -> DeviceId {
        match self.devices.iter().find(|(known, _)| *known == ctx) {
            Some(&(_, id)) => id,
            None => self.register_device(ctx),
        }
    }

    #[cold]
    fn register_device(&mut self, ctx: Context) -> DeviceId {
        let id = DeviceId::register(&ctx.to_string());
        self.devices.push((ctx, id));
        id
    }
}

thread_local! {
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static IDS: RefCell<IdCache> = RefCell::new(IdCache::default());
}

/// The profiler event for engine event `event`, its timestamp not set yet.
fn to_event(event: EngineEvent) -> Event {
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
    let (device, name) = IDS.with(|ids| {
        let mut ids = ids.borrow_mut();
        (ids.device(ctx), ids.name(op))
    });
    let info = OpInfo::new(id).priority(priority).property(prop as u8);
    Event::op(kind, device, name, info).with_error(failed)
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
            self.profiler.record(to_event(event));
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn cached_ids_are_the_interned_ones() {
        let op = OpName::new("probe-cache-test");
        let mut ids = IdCache::default();
        let first = ids.name(op);
        assert_eq!(first, NameId::intern("probe-cache-test"));
        assert_eq!(ids.name(op), first); // from the cache now
        let gpu = Context::gpu(3);
        assert_eq!(ids.device(gpu), DeviceId::register("gpu(3)"));
        assert_eq!(ids.device(gpu), ids.device(gpu));
        assert_ne!(ids.device(gpu), ids.device(Context::cpu(0)));
    }
}
