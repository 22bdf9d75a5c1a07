//! Live resize: tasks keep arriving while the pool grows and shrinks; every task runs exactly
//! once. Also: per-worker counters add up, and a resized pool still shuts down cleanly.

mod common;

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use common::{await_at_least, pool, within_deadline};
use enginetop::pool::{Pool, PoolError, PoolKind, PoolOptions};

const TASKS: usize = 1_000_000;

/// Schedules `TASKS` tasks (half from outside, half as children scheduled from inside the pool)
/// while the main thread resizes through 1 -> 8 -> 2 -> 4.
fn resize_under_load(kind: PoolKind) {
    let tp = Arc::new(pool(kind, 1, true));
    let runs: Arc<Vec<AtomicU8>> = Arc::new((0..TASKS).map(|_| AtomicU8::new(0)).collect());
    let scheduled = Arc::new(AtomicUsize::new(0));
    let producer = {
        let (tp, runs, scheduled) = (tp.clone(), runs.clone(), scheduled.clone());
        std::thread::spawn(move || {
            for parent in (0..TASKS).step_by(2) {
                let (runs, tp2) = (runs.clone(), tp.clone());
                tp.spawn(move || {
                    runs[parent].fetch_add(1, Ordering::Relaxed);
                    let runs = runs.clone();
                    tp2.spawn(move || {
                        runs[parent + 1].fetch_add(1, Ordering::Relaxed);
                    });
                });
                scheduled.store(parent + 2, Ordering::Release);
            }
        })
    };
    for (step, threads) in [8, 2, 4].into_iter().enumerate() {
        await_at_least(&scheduled, TASKS / 4 * (step + 1), "producer progress");
        tp.set_num_threads(threads).expect("resize");
        assert_eq!(tp.num_threads(), threads);
    }
    producer.join().unwrap();
    assert_eq!(tp.stats().num_threads, 4);
    drop(common::sole_owner(tp));
    let wrong: Vec<usize> = (0..TASKS)
        .filter(|&i| runs[i].load(Ordering::Relaxed) != 1)
        .take(5)
        .collect();
    assert!(
        wrong.is_empty(),
        "{kind}: tasks not run exactly once, e.g. {wrong:?}"
    );
}

#[test]
fn resize_under_load_simple() {
    within_deadline("resize", || resize_under_load(PoolKind::Simple));
}

#[test]
fn resize_under_load_eigen() {
    within_deadline("resize", || resize_under_load(PoolKind::Eigen));
}

#[test]
fn resize_under_load_chase_lev() {
    within_deadline("resize", || resize_under_load(PoolKind::ChaseLev));
}

/// Shrink and grow back and forth quickly, racing retirements with grows.
#[test]
fn rapid_resizes_keep_one_thread_per_slot() {
    for kind in PoolKind::ALL {
        within_deadline("rapid resize", move || {
            let tp = Arc::new(pool(kind, 2, true));
            let ran = Arc::new(AtomicUsize::new(0));
            let mut expected = 0;
            for round in 0..200 {
                tp.set_num_threads(1 + round % 5).unwrap();
                for _ in 0..50 {
                    let ran = ran.clone();
                    tp.spawn(move || {
                        ran.fetch_add(1, Ordering::Relaxed);
                    });
                    expected += 1;
                }
            }
            drop(common::sole_owner(tp));
            assert_eq!(ran.load(Ordering::Relaxed), expected, "{kind}");
        });
    }
}

#[test]
fn resize_rejects_zero_and_beyond_max() {
    for kind in PoolKind::ALL {
        let tp = Pool::new(PoolOptions::new(kind, 2, "limits").max_threads(4)).unwrap();
        assert!(matches!(
            tp.set_num_threads(0),
            Err(PoolError::ZeroThreads(_))
        ));
        let err = tp.set_num_threads(5).unwrap_err();
        assert!(err.to_string().contains("max_threads = 4"), "{err}");
        assert_eq!(tp.num_threads(), 2, "a refused resize changes nothing");
    }
}

#[test]
fn a_pool_created_empty_runs_inline_then_grows() {
    for kind in PoolKind::ALL {
        let tp = pool(kind, 0, true);
        let ran_on = Arc::new(std::sync::Mutex::new(None));
        let r = ran_on.clone();
        tp.spawn(move || *r.lock().unwrap() = Some(std::thread::current().id()));
        assert_eq!(
            *ran_on.lock().unwrap(),
            Some(std::thread::current().id()),
            "{kind}: inline"
        );
        tp.set_num_threads(2).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        tp.spawn(move || {
            tx.send(std::thread::current().name().map(str::to_string))
                .unwrap()
        });
        let name = rx.recv_timeout(common::DEADLINE).unwrap().unwrap();
        assert!(
            name.starts_with("t-"),
            "{kind}: ran on a worker, got {name}"
        );
    }
}

#[test]
fn counters_add_up_to_the_tasks_scheduled() {
    for kind in PoolKind::ALL {
        let tp = Arc::new(pool(kind, 2, true));
        let done = Arc::new(AtomicUsize::new(0));
        for _ in 0..10_000 {
            let (done, tp2) = (done.clone(), tp.clone());
            tp.spawn(move || {
                let done = done.clone();
                tp2.spawn(move || {
                    done.fetch_add(1, Ordering::SeqCst);
                });
            });
        }
        common::await_count(&done, 10_000, "children");
        let stats = tp.stats();
        let counted = stats.tasks_run() + stats.inline_runs;
        // The last children may still be finishing their bookkeeping: at least all parents.
        assert!((10_000..=20_000).contains(&counted), "{kind}: {counted}");
        if kind != PoolKind::Simple {
            let steals: u64 = stats.workers.iter().map(|w| w.steals).sum();
            let attempts: u64 = stats.workers.iter().map(|w| w.steal_attempts).sum();
            assert!(attempts >= steals, "{kind}");
        }
        assert_eq!(stats.workers.len(), 2);
    }
}

/// A pool shrunk and then dropped at once: the retiring workers may be asleep with their
/// wake-up taken by another sleeper; drop must still get every one of them out (it hung here
/// before `wake_until_retired`).
#[test]
fn shrink_then_drop_never_hangs() {
    for kind in [PoolKind::Eigen, PoolKind::ChaseLev] {
        within_deadline("shrink then drop", move || {
            for round in 0..300 {
                let tp = pool(kind, 4, round % 2 == 0);
                let ran = Arc::new(AtomicUsize::new(0));
                for _ in 0..4 {
                    let ran = ran.clone();
                    tp.spawn(move || {
                        ran.fetch_add(1, Ordering::Relaxed);
                    });
                }
                tp.set_num_threads(2).unwrap();
                drop(tp);
                assert_eq!(ran.load(Ordering::Relaxed), 4, "{kind} round {round}");
            }
        });
    }
}
