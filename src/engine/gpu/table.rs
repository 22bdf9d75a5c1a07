//! Per var, the GPU accesses a later op must be ordered after: the last writer, and the
//! readers since it (see the [module docs](super) for the protocol and why it is safe).
//!
//! One map from var id to its records, under one lock, held only to look up or update (never
//! while waiting). A record whose fence has passed needs no waiting, so lookups skip it, and
//! a sweep drops vars whose records have all passed once the map has doubled since the last
//! sweep: the table stays about as large as the set of vars with device work in flight.
#![forbid(unsafe_code)]

use std::collections::HashMap;
// std's `Arc`: the fences are shared with `exec.rs`, whose trait-object handles are std's.
use std::sync::Arc;

use smallvec::SmallVec;

use super::fence::Fence;
use crate::device::stream::{Event, StreamId};
use crate::engine::opr::Dep;
use crate::engine::var::{Access, Var};
use crate::sync::{AtomicBool, Mutex, Ordering};

/// The smallest map size that triggers a sweep.
const SWEEP_MIN: usize = 1024;

/// One GPU op's access to a var: where its work ran and how to wait for it.
#[derive(Clone, Debug)]
pub(crate) struct AccessRecord {
    /// The stream the op's work ran on.
    pub(crate) stream: StreamId,
    /// Recorded on that stream after the op's work (`None` if the record failed: waiters
    /// then wait for the fence on the host).
    pub(crate) event: Option<Event>,
    /// Set once the op's work and host bodies have finished.
    pub(crate) fence: Arc<Fence>,
}

impl AccessRecord {
    fn pending(&self) -> bool {
        !self.fence.is_set()
    }
}

/// A var's records.
#[derive(Debug, Default)]
struct VarAccesses {
    writer: Option<AccessRecord>,
    readers: SmallVec<[AccessRecord; 2]>,
}

impl VarAccesses {
    fn pending(&self) -> bool {
        self.writer.as_ref().is_some_and(AccessRecord::pending)
            || self.readers.iter().any(AccessRecord::pending)
    }

    /// The pending records an access of kind `access` must wait for.
    fn required(&self, access: Access) -> impl Iterator<Item = &AccessRecord> {
        let readers = match access {
            Access::Read => &[][..],
            Access::Write => &self.readers[..],
        };
        self.writer
            .iter()
            .chain(readers)
            .filter(|record| record.pending())
    }
}

struct TableState {
    vars: HashMap<u64, VarAccesses>,
    sweep_at: usize,
}

/// Every var's GPU access records (event mode).
pub(crate) struct VarTable {
    state: Mutex<TableState>,
    /// Set by the first record: until then no host op needs to look.
    tracking: AtomicBool,
}

impl VarTable {
    pub(crate) fn new() -> Self {
        VarTable {
            state: Mutex::new(TableState {
                vars: HashMap::new(),
                sweep_at: SWEEP_MIN,
            }),
            tracking: AtomicBool::new(false),
        }
    }

    /// Whether any GPU access was ever recorded (a host op with nothing to wait for skips the
    /// lookup). Set before the recording op completes, so an op ordered after it sees it.
    #[inline]
    pub(crate) fn is_tracking(&self) -> bool {
        self.tracking.load(Ordering::Acquire)
    }

    /// The pending records the accesses `deps` must be ordered after.
    pub(crate) fn required(&self, deps: &[Dep]) -> SmallVec<[AccessRecord; 4]> {
        let state = self.state.lock();
        let mut required = SmallVec::new();
        for dep in deps {
            if let Some(accesses) = state.vars.get(&dep.var.id) {
                required.extend(accesses.required(dep.access).cloned());
            }
        }
        required
    }

    /// Blocks until the device work `deps` must follow has finished (host-side dependents).
    pub(crate) fn host_wait(&self, deps: &[Dep]) {
        for record in self.required(deps) {
            record.fence.wait();
        }
    }

    /// Blocks until the last GPU write of `var` has finished (`wait_for_var`).
    pub(crate) fn host_wait_var(&self, var: &Var) {
        let writer = self
            .state
            .lock()
            .vars
            .get(&var.id())
            .and_then(|accesses| accesses.writer.clone());
        if let Some(writer) = writer {
            writer.fence.wait();
        }
    }

    /// Records one op's accesses `deps` as `record` (its writes replace the writer and the
    /// readers, its reads join the readers, replacing a record of the same stream, which the
    /// new one covers).
    pub(crate) fn record(&self, deps: &[Dep], record: &AccessRecord) {
        self.tracking.store(true, Ordering::Release);
        let mut state = self.state.lock();
        for dep in deps {
            let accesses = state.vars.entry(dep.var.id).or_default();
            match dep.access {
                Access::Write => {
                    accesses.writer = Some(record.clone());
                    accesses.readers.clear();
                }
                Access::Read => {
                    accesses
                        .readers
                        .retain(|reader| reader.pending() && reader.stream != record.stream);
                    accesses.readers.push(record.clone());
                }
            }
        }
        if state.vars.len() > state.sweep_at {
            state.vars.retain(|_, accesses| accesses.pending());
            state.sweep_at = SWEEP_MIN.max(2 * state.vars.len());
        }
    }

    /// Forgets every record (the engine is stopped: nothing is in flight).
    pub(crate) fn clear(&self) {
        let mut state = self.state.lock();
        state.vars.clear();
        state.sweep_at = SWEEP_MIN;
    }

    #[cfg(all(test, not(loom)))]
    fn len(&self) -> usize {
        self.state.lock().vars.len()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::device::stream::StreamKind;
    use crate::engine::var::VarRef;

    fn stream(index: u32) -> StreamId {
        StreamId {
            device: 0,
            kind: StreamKind::Compute,
            index,
        }
    }

    fn record(index: u32) -> AccessRecord {
        AccessRecord {
            stream: stream(index),
            event: None,
            fence: Arc::new(Fence::default()),
        }
    }

    fn dep(var: &Var, access: Access) -> Dep {
        Dep {
            var: VarRef::of(var),
            access,
        }
    }

    fn streams(records: &[AccessRecord]) -> Vec<u32> {
        records.iter().map(|record| record.stream.index).collect()
    }

    #[test]
    fn reads_need_the_writer_and_writes_need_the_readers_too() {
        let table = VarTable::new();
        let x = Var::new(1);
        assert!(!table.is_tracking());
        table.record(&[dep(&x, Access::Write)], &record(0));
        assert!(table.is_tracking());
        table.record(&[dep(&x, Access::Read)], &record(1));
        table.record(&[dep(&x, Access::Read)], &record(2));
        assert_eq!(streams(&table.required(&[dep(&x, Access::Read)])), [0]);
        assert_eq!(
            streams(&table.required(&[dep(&x, Access::Write)])),
            [0, 1, 2]
        );
        table.record(&[dep(&x, Access::Write)], &record(3));
        assert_eq!(streams(&table.required(&[dep(&x, Access::Write)])), [3]);
    }

    #[test]
    fn finished_records_need_no_waiting_and_a_stream_keeps_one_reader() {
        let table = VarTable::new();
        let x = Var::new(1);
        let writer = record(0);
        table.record(&[dep(&x, Access::Write)], &writer);
        table.record(&[dep(&x, Access::Read)], &record(1));
        table.record(&[dep(&x, Access::Read)], &record(1));
        assert_eq!(streams(&table.required(&[dep(&x, Access::Write)])), [0, 1]);
        writer.fence.set();
        assert_eq!(
            streams(&table.required(&[dep(&x, Access::Read)])),
            [] as [u32; 0]
        );
        table.host_wait_var(&x); // the writer has finished: returns at once
    }

    #[test]
    fn the_sweep_drops_vars_whose_work_has_finished() {
        let table = VarTable::new();
        let vars: Vec<Var> = (0..SWEEP_MIN as u64 + 1).map(Var::new).collect();
        let done = record(0);
        done.fence.set();
        for var in &vars[..SWEEP_MIN] {
            table.record(&[dep(var, Access::Write)], &done);
        }
        assert_eq!(table.len(), SWEEP_MIN);
        table.record(&[dep(&vars[SWEEP_MIN], Access::Write)], &record(1));
        assert_eq!(table.len(), 1, "only the var with work in flight is kept");
        table.clear();
        assert_eq!(table.len(), 0);
    }
}
