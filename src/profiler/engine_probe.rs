//! The engine's side of the profiler: an [`EngineObserver`] that turns the engine's op events
//! into profiler events on the op's device.
//!
//! The engine's events carry no op id, so the probe numbers ops itself: an op gets a fresh id
//! when it starts, kept on a per-thread stack until its `Finished` on the same thread (a
//! `push_sync` body starts and finishes on one worker; a nested op on that thread pushes and
//! pops in order). A `Finished` on another thread (an async op completed elsewhere) gets a
//! fresh id and shows as an unmatched end. `Queued` events are not recorded: without an id
//! they cannot be paired with their start, so engine traces have no queued -> start flow
//! arrows yet (they need an op id in the engine's events).
#![forbid(unsafe_code)]

use std::cell::RefCell;

use super::{DeviceId, NameId, OpInfo, Profiler};
use crate::engine::{Context, EngineEvent, EngineObserver};
use crate::sync::{thread_local, AtomicU64, Mutex, Ordering};

thread_local! {
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static RUNNING: RefCell<Vec<u64>> = RefCell::new(Vec::new());
}

/// Records engine op starts and ends into a [`Profiler`].
pub struct EngineProbe {
    profiler: Profiler,
    devices: Mutex<Vec<(Context, DeviceId)>>,
    next_op: AtomicU64,
}

impl EngineProbe {
    /// A probe recording into `profiler`.
    pub fn new(profiler: &Profiler) -> Self {
        EngineProbe {
            profiler: profiler.clone(),
            devices: Mutex::new(Vec::new()),
            next_op: AtomicU64::new(1),
        }
    }

    /// The profiler device of engine context `ctx` (registered on first sight as `cpu(0)`...).
    fn device(&self, ctx: Context) -> DeviceId {
        let mut devices = self.devices.lock();
        if let Some((_, id)) = devices.iter().find(|(known, _)| *known == ctx) {
            return *id;
        }
        let id = DeviceId::register(&ctx.to_string());
        devices.push((ctx, id));
        id
    }

    fn fresh_id(&self) -> u64 {
        self.next_op.fetch_add(1, Ordering::Relaxed)
    }
}

impl EngineObserver for EngineProbe {
    fn on_event(&self, event: EngineEvent) {
        match event {
            EngineEvent::Queued { .. } => {}
            EngineEvent::Started { op, ctx } => {
                let id = self.fresh_id();
                RUNNING.with(|running| running.borrow_mut().push(id));
                let name = NameId::intern(op.as_str());
                self.profiler
                    .op_start(self.device(ctx), name, OpInfo::new(id));
            }
            EngineEvent::Finished { op, ctx, failed } => {
                let id = RUNNING
                    .with(|running| running.borrow_mut().pop())
                    .unwrap_or_else(|| self.fresh_id());
                let name = NameId::intern(op.as_str());
                self.profiler
                    .op_end(self.device(ctx), name, OpInfo::new(id), failed);
            }
        }
    }
}
