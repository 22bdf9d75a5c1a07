//! A panicking task is caught, counted and reported; the worker lives on.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use enginetop::pool::PoolKind;

#[test]
fn panicking_tasks_do_not_kill_workers() {
    // Silence the default hook's 100 messages per kind (this file's tests only).
    std::panic::set_hook(Box::new(|_| {}));
    for kind in PoolKind::ALL {
        let tp = common::pool(kind, 2, true);
        let ran = Arc::new(AtomicUsize::new(0));
        for i in 0..1000 {
            let ran = ran.clone();
            tp.spawn(move || {
                if i % 10 == 0 {
                    panic!("task {i} failed on purpose");
                }
                ran.fetch_add(1, Ordering::SeqCst);
            });
        }
        common::await_count(&ran, 900, "the non-panicking tasks");
        // A panicking task is counted after it unwinds: wait for the count to settle.
        let start = std::time::Instant::now();
        while tp.stats().panics < 100 && start.elapsed() < common::DEADLINE {
            std::thread::yield_now();
        }
        let stats = tp.stats();
        drop(tp);
        assert_eq!(stats.panics, 100, "{kind}");
        let worker_panics: u64 = stats.workers.iter().map(|w| w.panics).sum();
        assert_eq!(worker_panics, 100, "{kind}: counted per worker too");
        let last = stats.last_panic.expect("the message is kept");
        assert!(last.contains("failed on purpose"), "{kind}: {last}");
    }
}
