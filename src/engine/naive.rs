//! The naive engine (MXNet's `NaiveEngine`): every op runs on the thread that makes it ready,
//! at once.
//!
//! Dependency tracking, errors and waits are the shared ones, so the naive engine reports
//! failures exactly as the threaded ones do (MXNet's drops errors passed to `on_complete`).
//! A synchronous op has finished when its push returns. An async op may hand its completion
//! to another thread; ops that depend on it then run on that thread when it completes. (MXNet's
//! naive engine blocks the push until the completion arrives instead, which deadlocks when the
//! completing thread waits for a later push.)
//!
//! An op made ready by a completion runs on the completing thread right after the op whose
//! completion that is returns, not inside it: each thread keeps a queue of such ops while it
//! runs one. Otherwise a thread completing an op that another thread keeps appending behind
//! would run the whole chain nested, one stack frame deeper per op, until its stack ran out.
#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};

use super::block::OpHandle;
use super::core::{Dispatch, DispatchStats};
use super::opr::{run_ready, OpHeader};
use super::threaded::check_cpu_only;
use super::{Context, EngineError, EngineKind, EngineSetting, FnProperty, OpName, WorkerCounts};

/// Runs every ready op inline.
pub(crate) struct Naive;

impl Dispatch for Naive {
    fn check(&self, name: OpName, ctx: Context, _prop: FnProperty) -> Result<(), EngineError> {
        check_cpu_only(name, ctx)
    }

    fn runs_at_push(&self, _op: &OpHeader) -> bool {
        true
    }

    fn dispatch(&self, op: OpHandle, _from_push: bool) {
        run_here(op);
    }

    fn stop(&self) {}

    fn start(&self) -> Result<(), EngineError> {
        Ok(())
    }

    // The handle refuses these first (settings.rs): the naive engine has no workers to size.
    fn set_cpu_workers(&self, _threads: usize) -> Result<(), EngineError> {
        Err(EngineError::NoSuchSetting {
            engine: EngineKind::Naive,
            setting: EngineSetting::CpuWorkers,
        })
    }

    fn set_priority_workers(&self, _threads: usize) -> Result<(), EngineError> {
        Err(EngineError::NoSuchSetting {
            engine: EngineKind::Naive,
            setting: EngineSetting::PriorityWorkers,
        })
    }

    fn stats(&self) -> DispatchStats {
        DispatchStats::default()
    }

    fn workers(&self) -> WorkerCounts {
        WorkerCounts::default() // the threads that make ops ready run them
    }
}

// Thread-local: the naive engine runs ops on the pushing thread, so the ops an op makes
// ready belong to that thread's run, not to the engine.
engine_thread_local! {
    /// Ops made ready on this thread while it runs one (`None`: it runs none).
    static MADE_READY: RefCell<Option<VecDeque<OpHandle>>> = RefCell::new(None);
}

/// Runs `op` on the calling thread, after the op it is running if it runs one.
fn run_here(op: OpHandle) {
    let outermost = MADE_READY.with(|made_ready| {
        let mut made_ready = made_ready.borrow_mut();
        match made_ready.as_mut() {
            Some(queue) => {
                queue.push_back(op);
                None
            }
            None => {
                *made_ready = Some(VecDeque::new());
                Some(op)
            }
        }
    });
    let mut next = outermost;
    if next.is_none() {
        return; // the running op's caller runs it next
    }
    while let Some(op) = next {
        // Ops report their own panics; this keeps a panicking observer from stranding the rest.
        let _ = panic::catch_unwind(AssertUnwindSafe(|| run_ready(op)));
        next = MADE_READY.with(|made_ready| made_ready.borrow_mut().as_mut()?.pop_front());
    }
    MADE_READY.with(|made_ready| *made_ready.borrow_mut() = None);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc};

    use crate::engine::{Engine, EngineKind, EngineOptions, OpSpec};

    /// One completion makes a chain of 20,000 ops ready: they run one after another on the
    /// completing thread (a small stack), not nested inside each other's completions.
    #[test]
    fn a_long_chain_made_ready_by_one_completion_runs_without_nesting() {
        let engine = Engine::new(EngineOptions::new(EngineKind::Naive, 1)).unwrap();
        let var = engine.new_variable();
        let writes = std::slice::from_ref(&var);
        let (hand_over, handed) = mpsc::channel();
        engine
            .push_async(OpSpec::new("hold").writes(writes), move |_, completion| {
                hand_over.send(completion).unwrap();
            })
            .unwrap();
        let completion = handed.recv().unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..20_000 {
            let ran = ran.clone();
            let op = OpSpec::new("queued").writes(writes);
            engine
                .push_sync(op, move |_| {
                    ran.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                })
                .unwrap();
        }
        assert_eq!(ran.load(Ordering::Relaxed), 0);
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || completion.done())
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(ran.load(Ordering::Relaxed), 20_000);
        engine.wait_for_all().unwrap();
    }
}
