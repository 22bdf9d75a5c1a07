//! MXNet's RandSumExpr workload (tests/cpp/engine/threaded_engine_test.cc), shared by the
//! engine suites that port it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One op of the workload: what it reads and writes, and how long it works.
pub struct RandSum {
    pub reads: Vec<usize>,
    pub write: usize,
    pub time: u64,
}

impl RandSum {
    /// MXNet's GenerateWorkload draw: write ~ U[0, vars), 2..19 reads ~ U[0, vars)
    /// (duplicates and the write var allowed), time ~ U[1, 9] us.
    pub fn draw(rng: &mut fastrand::Rng, vars: usize) -> Self {
        RandSum {
            write: rng.usize(..vars),
            reads: (0..rng.usize(2..20)).map(|_| rng.usize(..vars)).collect(),
            time: rng.u64(1..10),
        }
    }
}

/// Busy-waits `micros` microseconds (the workloads' "time"; a sleep would take ~60 us at least).
pub fn spin_for(micros: u64) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_micros(micros) {
        std::hint::spin_loop();
    }
}

/// `data[write] = sum(data[reads]) / (nread + 1)`, then `time` us of work.
pub fn evaluate(wl: &RandSum, data: &[AtomicU64]) {
    let sum: f64 = wl
        .reads
        .iter()
        .map(|&r| f64::from_bits(data[r].load(Ordering::Relaxed)))
        .sum();
    let value = sum / (wl.reads.len() + 1) as f64;
    data[wl.write].store(value.to_bits(), Ordering::Relaxed);
    spin_for(wl.time);
}

/// `vars` values, all 1.0.
pub fn fresh_data(vars: usize) -> Arc<Vec<AtomicU64>> {
    Arc::new(
        (0..vars)
            .map(|_| AtomicU64::new(1.0f64.to_bits()))
            .collect(),
    )
}
