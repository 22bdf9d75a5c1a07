use enginetop::pool::{Pool, PoolKind, PoolOptions};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[test]
fn simple_pool_runs_everything_before_drop_returns() {
    let pool = Pool::new(PoolOptions::new(PoolKind::Simple, 2, "smoke")).unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..10_000 {
        let ran = ran.clone();
        pool.spawn(move || {
            ran.fetch_add(1, Ordering::Relaxed);
        });
    }
    drop(pool);
    assert_eq!(ran.load(Ordering::Relaxed), 10_000);
}
