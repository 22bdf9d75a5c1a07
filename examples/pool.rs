//! A work-stealing pool: a recursive sum split into tasks, a live resize, and the pool's
//! per-worker counters. `cargo run --release --example pool`
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

use enginetop::pool::{spawn_here, Pool, PoolKind, PoolOptions};

/// Adds `lo..hi` into `sum`, splitting big ranges into child tasks on the same pool.
fn sum_range(lo: u64, hi: u64, sum: Arc<AtomicU64>, done: mpsc::Sender<()>) {
    if hi - lo <= 1_000 {
        sum.fetch_add((lo..hi).sum(), Ordering::Relaxed);
        done.send(()).expect("main waits");
        return;
    }
    let mid = lo + (hi - lo) / 2;
    let (left, right) = ((sum.clone(), done.clone()), (sum, done));
    spawn_here(move || sum_range(lo, mid, left.0, left.1)).expect("runs on a pool worker");
    spawn_here(move || sum_range(mid, hi, right.0, right.1)).expect("runs on a pool worker");
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "example"))?;
    let sum = Arc::new(AtomicU64::new(0));
    let (done, finished) = mpsc::channel();
    let (n, leaves) = (1_024_000u64, 1_024);
    let task_sum = sum.clone();
    pool.spawn(move || sum_range(0, n, task_sum, done));
    pool.set_num_threads(4)?; // grows while the tasks run; nothing queued is lost
    for _ in 0..leaves {
        finished.recv()?;
    }
    assert_eq!(sum.load(Ordering::Relaxed), n * (n - 1) / 2);
    let stats = pool.stats();
    println!(
        "sum of 0..{n} = {} on {} threads",
        sum.load(Ordering::Relaxed),
        stats.num_threads
    );
    for worker in &stats.workers {
        println!(
            "  worker {}: {} tasks, {} steals",
            worker.index, worker.tasks_run, worker.steals
        );
    }
    Ok(())
}
