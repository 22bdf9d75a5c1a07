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
//! interned, keeps its id), so each thread caches what it looked up: names in a vector indexed
//! by the engine's name id, contexts in a short list (a thread sees a handful). An event then
//! costs two thread-local lookups and the profiler's record; the interners' locks are taken
//! once per thread and name or context.
#![forbid(unsafe_code)]

use std::cell::RefCell;

use super::{DeviceId, NameId, OpInfo, Profiler};
use crate::engine::{Context, EngineEvent, EngineObserver, FnProperty, OpName};
use crate::sync::thread_local;

thread_local! {
    /// Profiler name ids by engine name id, plus one (0: not looked up yet).
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static NAMES: RefCell<Vec<u32>> = RefCell::new(Vec::new());
    /// Profiler devices of the contexts this thread has seen.
    #[allow(clippy::missing_const_for_thread_local)]
    static DEVICES: RefCell<Vec<(Context, DeviceId)>> = RefCell::new(Vec::new());
}

/// The profiler's id for op name `op` (interned on this thread's first sight of it).
fn name_id(op: OpName) -> NameId {
    let index = op.id() as usize;
    let cached = NAMES.with(|names| names.borrow().get(index).copied().unwrap_or(0));
    if cached != 0 {
        return NameId::from_raw(cached - 1);
    }
    let name = NameId::intern(op.as_str());
    NAMES.with(|names| {
        let mut names = names.borrow_mut();
        if names.len() <= index {
            names.resize(index + 1, 0);
        }
        names[index] = name.id() + 1;
    });
    name
}

/// The profiler device of engine context `ctx` (registered as `cpu(0)`, `gpu(1)`...).
fn device_id(ctx: Context) -> DeviceId {
    let cached = DEVICES.with(|devices| {
        let devices = devices.borrow();
        devices
            .iter()
            .find(|(known, _)| *known == ctx)
            .map(|(_, id)| *id)
    });
    if let Some(id) = cached {
        return id;
    }
    let id = DeviceId::register(&ctx.to_string());
    DEVICES.with(|devices| devices.borrow_mut().push((ctx, id)));
    id
}

/// The profiler's description of op `id`.
fn info(id: u64, prop: FnProperty, priority: i32) -> OpInfo {
    OpInfo::new(id).priority(priority).property(prop as u8)
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
        match event {
            EngineEvent::Queued {
                id,
                op,
                ctx,
                prop,
                priority,
            } => {
                let op_info = info(id, prop, priority);
                self.profiler
                    .op_queued(device_id(ctx), name_id(op), op_info);
            }
            EngineEvent::Started {
                id,
                op,
                ctx,
                prop,
                priority,
            } => {
                let op_info = info(id, prop, priority);
                self.profiler.op_start(device_id(ctx), name_id(op), op_info);
            }
            EngineEvent::Finished {
                id,
                op,
                ctx,
                prop,
                priority,
                failed,
            } => {
                let op_info = info(id, prop, priority);
                self.profiler
                    .op_end(device_id(ctx), name_id(op), op_info, failed);
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn cached_ids_are_the_interned_ones() {
        let op = OpName::new("probe-cache-test");
        let first = name_id(op);
        assert_eq!(first, NameId::intern("probe-cache-test"));
        assert_eq!(name_id(op), first); // from the cache now
        let gpu = Context::gpu(3);
        assert_eq!(device_id(gpu), DeviceId::register("gpu(3)"));
        assert_eq!(device_id(gpu), device_id(gpu));
        assert_ne!(device_id(gpu), device_id(Context::cpu(0)));
    }
}
