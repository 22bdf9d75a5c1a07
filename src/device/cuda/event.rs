//! CUDA events behind [`Event`], and the clock that maps GPU timing events onto host
//! instants for the observer.

use std::any::Any;
use std::fmt;
// std's `Arc`: cudarc hands out its contexts and streams as `std::sync::Arc`s.
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{sys, CudaContext, CudaEvent};

use super::{driver, CudaShared};
use crate::device::stream::{Event, EventImpl, StreamError};
use crate::sync::{AtomicU64, Ordering};

/// Maps GPU timing events onto the host clock: one event recorded (on a stream made for it)
/// and waited for when the device was opened, and the host instant right after. One clock
/// per context, so timestamps of different streams compare.
pub(super) struct DeviceClock {
    base: CudaEvent,
    base_at: Instant,
}

impl DeviceClock {
    pub(super) fn new(ctx: &Arc<CudaContext>) -> Result<Self, StreamError> {
        let stream = ctx.new_stream().map_err(driver("cuStreamCreate"))?;
        let base = ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(driver("cuEventCreate"))?;
        base.record(&stream).map_err(driver("cuEventRecord"))?;
        base.synchronize().map_err(driver("cuEventSynchronize"))?;
        Ok(DeviceClock {
            base,
            base_at: Instant::now(),
        })
    }

    /// When `event` completed, on the host clock (f32 milliseconds: about 60 us resolution
    /// after 1000 s); now if CUDA cannot say.
    pub(super) fn at(&self, event: &CudaEvent) -> Instant {
        match self.base.elapsed_ms(event) {
            Ok(ms) if ms >= 0.0 => self.base_at + Duration::from_secs_f64(f64::from(ms) / 1e3),
            _ => Instant::now(),
        }
    }
}

/// A CUDA event with its record count.
pub(super) struct CudaEventImpl {
    pub(super) event: CudaEvent,
    pub(super) shared: Arc<CudaShared>,
    pub(super) generation: AtomicU64,
}

impl fmt::Debug for CudaEventImpl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaEvent")
            .field("device", &self.shared.info.ordinal)
            .field("generation", &self.generation())
            .finish()
    }
}

impl EventImpl for CudaEventImpl {
    fn query(&self) -> bool {
        self.event.try_is_complete().unwrap_or(true)
    }

    fn synchronize(&self) -> Result<(), StreamError> {
        if let Err(err) = self.event.synchronize() {
            self.shared.poison(&err);
        }
        self.shared.latch.report()
    }

    fn elapsed_ms(&self, end: &Event) -> Result<f32, StreamError> {
        let end = end
            .downcast::<CudaEventImpl>()
            .ok_or(StreamError::ForeignEvent {
                used_with: "a CUDA event".to_string(),
                what: "backend",
            })?;
        if self.generation() == 0 || end.generation() == 0 {
            return Err(StreamError::EventNotRecorded);
        }
        self.shared.latch.refuse_if_poisoned()?;
        self.event
            .elapsed_ms(&end.event)
            .map_err(driver("cuEventElapsedTime"))
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
