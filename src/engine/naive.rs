//! The naive engine (MXNet's `NaiveEngine`): every op runs on the thread that makes it ready,
//! at once.
//!
//! Dependency tracking, errors and waits are the shared ones, so the naive engine reports
//! failures exactly as the threaded ones do (MXNet's drops errors passed to `on_complete`).
//! A synchronous op has finished when its push returns. An async op may hand its completion
//! to another thread; ops that depend on it then run on that thread when it completes. (MXNet's
//! naive engine blocks the push until the completion arrives instead, which deadlocks when the
//! completing thread waits for a later push.)
#![forbid(unsafe_code)]

use super::block::OpHandle;
use super::core::{Dispatch, DispatchStats};
use super::opr::run_ready;
use super::{Context, EngineError, FnProperty, OpName};
use crate::device::gpu::no_gpu_backend;

/// Runs every ready op inline.
pub(crate) struct Naive;

impl Dispatch for Naive {
    fn check(&self, name: OpName, ctx: Context, _prop: FnProperty) -> Result<(), EngineError> {
        if ctx.is_cpu() {
            Ok(())
        } else {
            Err(no_gpu_backend(name, ctx))
        }
    }

    fn runs_at_push(&self, _prop: FnProperty) -> bool {
        true
    }

    fn dispatch(&self, op: OpHandle, _from_push: bool) {
        run_ready(op); // ops report their own panics
    }

    fn stop(&self) {}

    fn start(&self) -> Result<(), EngineError> {
        Ok(())
    }

    fn set_cpu_workers(&self, _threads: usize) -> Result<(), EngineError> {
        Ok(()) // the pushing thread is the only worker
    }

    fn set_priority_workers(&self, _threads: usize) -> Result<(), EngineError> {
        Ok(())
    }

    fn stats(&self) -> DispatchStats {
        DispatchStats::default()
    }
}
