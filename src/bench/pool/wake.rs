//! wake_hot and wake_cold: schedule one task that records when it starts; latency = start -
//! schedule. Hot samples follow each other back to back; cold ones each follow an idle pause,
//! so the workers have gone to sleep (or at least stopped spinning) when the task arrives.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use super::contender::Runner;
use super::{BenchError, Metric};
use crate::bench::stats::percentile;
use crate::pool::barrier::Barrier;
use crate::sync::{Arc, AtomicU64, Ordering};

/// What one latency sample's task reports back.
struct WakeProbe {
    /// When the task started, in ns since the rep's epoch.
    started_ns: AtomicU64,
    /// Opened by the task once `started_ns` is written.
    recorded: Barrier,
}

/// One rep: `samples` latencies, each after `idle` (cold) or none (hot); their p50 and p99.
pub(super) fn wake_once(
    runner: &Runner,
    samples: usize,
    idle: Option<Duration>,
) -> Result<Metric, BenchError> {
    let epoch = Instant::now();
    // Every sample's probe exists before the first is scheduled and outlives the rep, as the
    // C++ peer's probes on its stack do: a task dropping the last reference would otherwise
    // free the probe in the worker, work the peer's worker never does.
    let probes: Vec<Arc<WakeProbe>> = (0..samples).map(|_| WakeProbe::new()).collect();
    let latencies_us: Vec<f64> = probes
        .iter()
        .map(|probe| {
            if let Some(idle) = idle {
                std::thread::sleep(idle);
            }
            one_latency(runner, probe, epoch).as_secs_f64() * 1e6
        })
        .collect();
    Ok(Metric::Latency {
        us_p50: percentile(&latencies_us, 50.0).ok_or(BenchError::NoSamples)?,
        us_p99: percentile(&latencies_us, 99.0).ok_or(BenchError::NoSamples)?,
    })
}

impl WakeProbe {
    fn new() -> Arc<WakeProbe> {
        Arc::new(WakeProbe {
            started_ns: AtomicU64::new(0),
            recorded: Barrier::new(1),
        })
    }
}

/// Schedules one task that records into the unused `probe` and returns how long after
/// scheduling it started.
fn one_latency(runner: &Runner, probe: &Arc<WakeProbe>, epoch: Instant) -> Duration {
    let task_probe = probe.clone();
    let scheduled_ns = nanos_since(epoch);
    runner.spawn(move || {
        task_probe
            .started_ns
            .store(nanos_since(epoch), Ordering::Release);
        task_probe.recorded.notify();
    });
    probe.recorded.wait();
    let started_ns = probe.started_ns.load(Ordering::Acquire);
    Duration::from_nanos(started_ns.saturating_sub(scheduled_ns))
}

fn nanos_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}
