//! Stream-level helpers shared by the GPU suites: a recorder of every stream event, phase
//! predicates, and a watchdog that never leaves a host gate closed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Instant;

use enginetop::device::stream::{StreamEvent, StreamObserver, StreamPhase};
use enginetop::device::work::{HostGate, OpTag};

use super::DEADLINE;

/// Every stream event, in the order the observer heard them.
#[derive(Default)]
pub struct StreamLog(pub Mutex<Vec<StreamEvent>>);

impl StreamObserver for StreamLog {
    fn on_stream_event(&self, event: StreamEvent) {
        self.0.lock().unwrap().push(event);
    }
}

/// An op, by its tag or its id.
pub trait OpKey: Copy {
    /// The op's id.
    fn op_id(self) -> u64;
}

impl OpKey for u64 {
    fn op_id(self) -> u64 {
        self
    }
}

impl OpKey for OpTag {
    fn op_id(self) -> u64 {
        self.id
    }
}

impl StreamLog {
    /// The events of `op`, in the order heard.
    pub fn of(&self, op: impl OpKey) -> Vec<StreamEvent> {
        let events = self.0.lock().unwrap();
        events
            .iter()
            .filter(|e| e.op.id == op.op_id())
            .copied()
            .collect()
    }

    /// When `op` first reached a phase `phase` accepts.
    pub fn first(&self, op: impl OpKey, phase: fn(&StreamPhase) -> bool) -> Instant {
        self.of(op)
            .iter()
            .find(|e| phase(&e.phase))
            .unwrap_or_else(|| panic!("no such event for op {}", op.op_id()))
            .at
    }

    /// When `op` last reached a phase `phase` accepts.
    pub fn last(&self, op: impl OpKey, phase: fn(&StreamPhase) -> bool) -> Instant {
        self.of(op)
            .iter()
            .rev()
            .find(|e| phase(&e.phase))
            .unwrap_or_else(|| panic!("no such event for op {}", op.op_id()))
            .at
    }

    /// When `op` first started.
    pub fn start(&self, op: impl OpKey) -> Instant {
        self.first(op, is_start)
    }

    /// When `op` first ended.
    pub fn end(&self, op: impl OpKey) -> Instant {
        self.first(op, is_end)
    }

    /// Ops with at least one unit submitted.
    pub fn submitted_ops(&self) -> usize {
        let events = self.0.lock().unwrap();
        let mut ops: Vec<u64> = events
            .iter()
            .filter(|e| e.phase == StreamPhase::Submit)
            .map(|e| e.op.id)
            .collect();
        ops.sort_unstable();
        ops.dedup();
        ops.len()
    }
}

pub fn is_start(phase: &StreamPhase) -> bool {
    *phase == StreamPhase::Start
}

pub fn is_end(phase: &StreamPhase) -> bool {
    matches!(phase, StreamPhase::End { .. })
}

pub fn is_submit(phase: &StreamPhase) -> bool {
    *phase == StreamPhase::Submit
}

/// Opens a gate after [`DEADLINE`] unless disarmed first (then the test fails).
pub struct Watchdog {
    cancel: mpsc::Sender<()>,
    fired: Arc<AtomicBool>,
    thread: thread::JoinHandle<()>,
}

impl Watchdog {
    /// Guards `gate`.
    pub fn guard(gate: &HostGate) -> Self {
        let (cancel, cancelled) = mpsc::channel::<()>();
        let fired = Arc::new(AtomicBool::new(false));
        let thread = {
            let (gate, fired) = (gate.clone(), Arc::clone(&fired));
            thread::spawn(move || {
                if let Err(mpsc::RecvTimeoutError::Timeout) = cancelled.recv_timeout(DEADLINE) {
                    fired.store(true, Ordering::SeqCst);
                }
                // Cancelled, timed out, or the test panicked (sender dropped): never leave a
                // stream held.
                gate.open();
            })
        };
        Watchdog {
            cancel,
            fired,
            thread,
        }
    }

    /// Stops the watchdog; panics if it had to open the gate.
    pub fn disarm(self, what: &str) {
        let _ = self.cancel.send(());
        self.thread.join().unwrap();
        assert!(
            !self.fired.load(Ordering::SeqCst),
            "{what}: had to be released by the watchdog"
        );
    }
}
