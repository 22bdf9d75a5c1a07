//! [`RunHooks`]: what the profiler and the binary plug into a run.
#![forbid(unsafe_code)]

use std::fmt;
use std::time::Duration;

use crate::device::identity::PoolId;
use crate::engine::{EngineObserver, EngineQueues};
use crate::pool::{Pool, PoolObserver};
use crate::profiler::{DeviceId, EngineProbe, PoolProbe, Profiler, QueueDepthSource, StreamProbe};
use crate::record::graph::GraphObserver;
use crate::sync::Arc;

use super::driver::RunLength;

/// Where a run stands; handed to [`RunHooks::progress`] on the driver thread.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    /// Iterations finished.
    pub iterations_done: u64,
    /// How long the run goes.
    pub length: RunLength,
    /// Time since the first iteration was pushed.
    pub elapsed: Duration,
}

impl Progress {
    /// The finished fraction, 0 to 1 (by iterations, or by time for a duration).
    pub fn fraction(&self) -> f64 {
        let fraction = match self.length {
            RunLength::Iterations(total) => self.iterations_done as f64 / total.max(1) as f64,
            RunLength::Duration(total) => {
                self.elapsed.as_secs_f64() / total.as_secs_f64().max(f64::MIN_POSITIVE)
            }
            RunLength::UntilStopped => 0.0,
        };
        fraction.clamp(0.0, 1.0)
    }

    /// One line with a bar `width` cells wide, for a terminal.
    ///
    /// ```
    /// use enginetop::workload::run::{Progress, RunLength};
    /// use std::time::Duration;
    ///
    /// let progress = Progress {
    ///     iterations_done: 5,
    ///     length: RunLength::Iterations(10),
    ///     elapsed: Duration::from_millis(1200),
    /// };
    /// assert_eq!(progress.bar(10), "[#####-----] 5/10 iterations, 1.2 s");
    /// ```
    pub fn bar(&self, width: usize) -> String {
        let filled = ((self.fraction() * width as f64).round() as usize).min(width);
        let cells = format!("{}{}", "#".repeat(filled), "-".repeat(width - filled));
        let elapsed = self.elapsed.as_secs_f64();
        match self.length {
            RunLength::Iterations(total) => format!(
                "[{cells}] {}/{total} iterations, {elapsed:.1} s",
                self.iterations_done
            ),
            RunLength::Duration(total) => format!(
                "[{cells}] {elapsed:.1}/{:.1} s, {} iterations",
                total.as_secs_f64(),
                self.iterations_done
            ),
            RunLength::UntilStopped => {
                format!("{} iterations, {elapsed:.1} s", self.iterations_done)
            }
        }
    }
}

/// The profiler's part of a run's summary; asked once, after the run.
pub trait ProfilerReport: Send + Sync {
    /// The aggregate table (per op name: count, total and mean time, ...), ready to print.
    fn aggregate_table(&self) -> String;
    /// The same rows as JSON, for `--summary json` (times in nanoseconds).
    fn aggregate_json(&self) -> serde_json::Value;
    /// Events dropped because a ring was full.
    fn dropped_events(&self) -> u64;
    /// Ops the table counts, every name's together (`iteration_end` included). Fewer than the
    /// run ran when ops' events were dropped, or the statistics were reset during the run.
    fn ops_counted(&self) -> u64;
    /// The profiler's statistics now (the workers' time for the scaling analysis).
    fn snapshot(&self) -> Option<crate::profiler::Snapshot> {
        None
    }
}

/// Hooks into a run. The default has none: no observers, no progress, no profiler.
#[derive(Default)]
pub struct RunHooks {
    /// Receives the engine's op events (queued, started, finished).
    pub engine_observer: Option<Arc<dyn EngineObserver>>,
    /// Makes the observer of each worker pool the engine starts (`cpu<i>`, `cpu-prio`,
    /// `engine`, `io`): the profiler's pool probes, so the engine's workers get rows.
    pub pool_observers: Option<crate::device::cpu::PoolObservers>,
    /// Receives GPU stream submit/start/end events (ops on GPU contexts).
    // std's `Arc`: a trait object, which loom's `Arc` cannot coerce to `dyn`.
    pub stream_observer: Option<std::sync::Arc<dyn crate::device::stream::StreamObserver>>,
    /// Receives the intra-op pool's steals, spins, parks and resizes (std's `Arc`, as
    /// [`PoolOptions::observer`](crate::pool::PoolOptions::observer) takes it).
    // std's `Arc`: a trait object, which loom's `Arc` cannot coerce to `dyn`.
    pub intra_pool_observer: Option<std::sync::Arc<dyn PoolObserver>>,
    /// Called on the driver thread after each finished iteration, and once at the end.
    pub progress: Option<Box<dyn FnMut(Progress) + Send>>,
    /// Asked for the aggregate table and dropped events of the summary.
    pub profiler: Option<Arc<dyn ProfilerReport>>,
    /// Given the engine's queues and the intra-op pool once both have started, to sample
    /// their depths (the profiler's queue watch).
    pub watch_queues: Option<QueueWatch>,
    /// Receives the graph that runs: its shape when a run starts, and each iteration op's
    /// run (op id, iteration, index) from its body (a recording's graph frames).
    // std's `Arc`: a trait object, which loom's `Arc` cannot coerce to `dyn`.
    pub graph: Option<std::sync::Arc<dyn GraphObserver>>,
}

/// Registers a run's queues for sampling: called once with the engine's queues and the
/// intra-op pool. The driver holds what it returns until the run is dropped (a watch that
/// holds its sources weakly then ends).
// std's `Arc`: a trait object, which loom's `Arc` cannot coerce to `dyn`.
pub type QueueWatch = std::sync::Arc<
    dyn Fn(&EngineQueues, &std::sync::Arc<Pool>) -> Box<dyn std::any::Any + Send + Sync>
        + Send
        + Sync,
>;

impl RunHooks {
    /// The hooks that profile a run into `profiler`: the engine's ops, its worker pools, GPU
    /// streams, the intra-op pool's workers, and the depths of the engine's queues and the
    /// intra-op pool's. No summary table ([`RunHooks::profiler`]) and no progress: the caller
    /// adds what it prints. A disabled profiler gets none.
    pub fn profiled(profiler: &Profiler) -> RunHooks {
        // std's `Arc`: the queue watch and the stream observer are trait objects, which
        // loom's `Arc` cannot coerce to `dyn`.
        use std::sync::Arc as StdArc;
        if !profiler.is_enabled() {
            return RunHooks::default();
        }
        let intra_device = DeviceId::of_pool(PoolId::INTRA_OP);
        let for_queues = profiler.clone();
        let watch_queues: QueueWatch =
            StdArc::new(move |engine: &EngineQueues, intra: &StdArc<Pool>| {
                let engine: StdArc<dyn QueueDepthSource> = StdArc::new(engine.clone());
                // The engine's source names each queue's device itself (its pools'): no
                // device here.
                for_queues.watch_queues(DeviceId::HOST, StdArc::downgrade(&engine));
                for_queues.watch_queues(intra_device, StdArc::downgrade(intra) as _);
                Box::new(engine) // the run holds it; the watch ends with the run
            });
        let intra = PoolProbe::for_pool(profiler, PoolId::INTRA_OP);
        RunHooks {
            engine_observer: Some(engine_observer(EngineProbe::new(profiler))),
            watch_queues: Some(watch_queues),
            pool_observers: PoolProbe::engine_pools(profiler),
            stream_observer: Some(StdArc::new(StreamProbe::new(profiler))),
            intra_pool_observer: Some(intra.into_observer()),
            ..RunHooks::default()
        }
    }
}

/// `probe` as the engine's observer (loom's `Arc` cannot coerce to a `dyn`: it goes through
/// `from_std` there).
#[cfg(not(loom))]
fn engine_observer(probe: EngineProbe) -> Arc<dyn EngineObserver> {
    Arc::new(probe)
}

#[cfg(loom)]
fn engine_observer(probe: EngineProbe) -> Arc<dyn EngineObserver> {
    Arc::from_std(std::sync::Arc::new(probe))
}

impl fmt::Debug for RunHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunHooks")
            .field("engine_observer", &self.engine_observer.is_some())
            .field("pool_observers", &self.pool_observers.is_some())
            .field("stream_observer", &self.stream_observer.is_some())
            .field("intra_pool_observer", &self.intra_pool_observer.is_some())
            .field("progress", &self.progress.is_some())
            .field("profiler", &self.profiler.is_some())
            .field("watch_queues", &self.watch_queues.is_some())
            .field("graph", &self.graph.is_some())
            .finish()
    }
}
