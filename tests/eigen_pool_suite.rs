//! Eigen's `threads_non_blocking_thread_pool.cpp`, ported, run on every pool kind.
//! Sizes are scaled for a 2-core machine (8 workers instead of 16, 10 iterations instead of
//! 100); the structure and the assertions are Eigen's.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use common::{await_count, pool, within_deadline};
use enginetop::pool::{Pool, PoolKind, PoolOptions};

const THREADS: usize = 8; // a multiple of 4, as Eigen's test needs
const ITERATIONS: usize = 10;

#[derive(Default)]
struct Phases {
    running: AtomicUsize,
    done: AtomicUsize,
    phase: AtomicUsize,
}

impl Phases {
    fn hold_until(&self, phase: usize) {
        let start = std::time::Instant::now();
        while self.phase.load(Ordering::SeqCst) < phase {
            assert!(
                start.elapsed() < common::DEADLINE,
                "task stuck before phase {phase}"
            );
            std::thread::yield_now();
        }
    }
}

/// "We never-ever fail to match available tasks with idle threads."
fn parallelism(tp: Pool) {
    let tp = Arc::new(tp);
    assert_eq!(tp.num_threads(), THREADS);
    assert_eq!(tp.current_thread_id(), None);
    for _ in 0..ITERATIONS {
        let p = Arc::new(Phases::default());
        // THREADS tasks, all running at once.
        for _ in 0..THREADS {
            let (p, tp2) = (p.clone(), tp.clone());
            tp.spawn(move || {
                let id = tp2.current_thread_id().expect("a worker knows its id");
                assert!(id < THREADS);
                p.running.fetch_add(1, Ordering::SeqCst);
                p.hold_until(1);
                p.done.fetch_add(1, Ordering::SeqCst);
            });
        }
        await_count(&p.running, THREADS, "first wave");
        p.running.store(0, Ordering::SeqCst);
        p.phase.store(1, Ordering::SeqCst);
        // While those exit, THREADS more; half exit, a quarter keep running, a quarter
        // schedule two tasks each from inside; main adds a quarter: THREADS running again.
        for i in 0..THREADS {
            let (p, tp2) = (p.clone(), tp.clone());
            tp.spawn(move || {
                p.running.fetch_add(1, Ordering::SeqCst);
                p.hold_until(2);
                if i < THREADS / 2 {
                } else if i < 3 * THREADS / 4 {
                    p.running.fetch_add(1, Ordering::SeqCst);
                    p.hold_until(3);
                    p.done.fetch_add(1, Ordering::SeqCst);
                } else {
                    for _ in 0..2 {
                        let p = p.clone();
                        tp2.spawn(move || {
                            p.running.fetch_add(1, Ordering::SeqCst);
                            p.hold_until(3);
                            p.done.fetch_add(1, Ordering::SeqCst);
                        });
                    }
                }
                p.done.fetch_add(1, Ordering::SeqCst);
            });
        }
        await_count(&p.running, THREADS, "second wave");
        p.running.store(0, Ordering::SeqCst);
        p.phase.store(2, Ordering::SeqCst);
        for _ in 0..THREADS / 4 {
            let p = p.clone();
            tp.spawn(move || {
                p.running.fetch_add(1, Ordering::SeqCst);
                p.hold_until(3);
                p.done.fetch_add(1, Ordering::SeqCst);
            });
        }
        await_count(
            &p.running,
            THREADS,
            "third wave (tasks from inside must be stolen)",
        );
        p.phase.store(3, Ordering::SeqCst);
        await_count(&p.done, 3 * THREADS, "all done");
    }
}

#[test]
fn parallelism_with_spinning() {
    for kind in PoolKind::ALL {
        within_deadline("parallelism", move || {
            parallelism(pool(kind, THREADS, true))
        });
    }
}

#[test]
fn parallelism_without_spinning() {
    for kind in PoolKind::ALL {
        within_deadline("parallelism", move || {
            parallelism(pool(kind, THREADS, false))
        });
    }
}

/// The `eigen` pool with newer Eigen's accounting: producers skip the notify while a worker
/// spins, and the spinner owes them the task.
#[test]
fn parallelism_with_notifies_skipped_for_spinners() {
    within_deadline("parallelism", || {
        let options = PoolOptions::new(PoolKind::Eigen, THREADS, "skip-notify")
            .skip_notify_when_spinning(true);
        parallelism(Pool::new(options).expect("pool starts"))
    });
}

#[test]
fn create_and_destroy_pools_of_every_size() {
    for kind in PoolKind::ALL {
        for threads in 0..16 {
            let tp = pool(kind, threads, true);
            assert_eq!(tp.num_threads(), threads);
            let ran = Arc::new(AtomicUsize::new(0));
            let r = ran.clone();
            tp.spawn(move || {
                r.fetch_add(1, Ordering::SeqCst);
            });
            drop(tp);
            assert_eq!(
                ran.load(Ordering::SeqCst),
                1,
                "{kind} with {threads} threads"
            );
        }
    }
}

/// A gate tasks block on until the test opens it.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
    }
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }
}

/// Eigen's cancel test, with tasks blocked on a gate instead of sleeping 2 s: cancel drops
/// everything queued, reports it, and drop returns once the running tasks end.
#[test]
fn cancel_drops_queued_tasks_and_reports_them() {
    for kind in PoolKind::ALL {
        within_deadline("cancel", move || {
            let tp = pool(kind, 2, true);
            let (gate, started) = (Arc::new(Gate::default()), Arc::new(AtomicUsize::new(0)));
            for _ in 0..1000 {
                let (gate, started) = (gate.clone(), started.clone());
                tp.spawn(move || {
                    started.fetch_add(1, Ordering::SeqCst);
                    gate.wait();
                });
            }
            let dropped = tp.cancel();
            gate.open();
            let stats = tp.stats();
            drop(tp);
            let started = started.load(Ordering::SeqCst);
            assert!(
                started <= 2,
                "{kind}: only the running tasks may start, got {started}"
            );
            assert_eq!(
                dropped + started,
                1000,
                "{kind}: every task ran or was reported dropped"
            );
            assert_eq!(stats.dropped, dropped as u64);
        });
    }
}

#[test]
fn tasks_scheduled_after_cancel_are_dropped_and_counted() {
    for kind in PoolKind::ALL {
        let tp = pool(kind, 2, true);
        assert_eq!(tp.cancel(), 0);
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        tp.spawn(move || {
            r.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(tp.stats().dropped, 1, "{kind}");
        drop(tp);
        assert_eq!(ran.load(Ordering::SeqCst), 0, "{kind}");
    }
}

/// Eigen's partition test: with both workers busy, a task hinted at worker i runs on i.
#[test]
fn steal_partitions_keep_hinted_tasks_on_their_worker() {
    within_deadline("partitions", || {
        let tp = enginetop::pool::non_blocking::EigenPool::new(
            PoolOptions::new(PoolKind::Eigen, 2, "parts").allow_spinning(false),
        )
        .unwrap();
        let tp = Arc::new(tp);
        tp.set_steal_partitions(&[(0, 1), (1, 2)]);
        let p = Arc::new(Phases::default());
        use enginetop::pool::{Task, ThreadPool};
        for _ in 0..2 {
            let p = p.clone();
            tp.schedule(Task::new(move || {
                p.running.fetch_add(1, Ordering::SeqCst);
                p.hold_until(1);
                p.done.fetch_add(1, Ordering::SeqCst);
            }));
        }
        await_count(&p.running, 2, "both workers busy");
        let ran_on: Arc<Vec<AtomicUsize>> =
            Arc::new((0..2).map(|_| AtomicUsize::new(99)).collect());
        for i in 0..2 {
            let (p, tp2, ran_on) = (p.clone(), tp.clone(), ran_on.clone());
            tp.schedule_with_hint(
                Task::new(move || {
                    ran_on[i].store(tp2.current_thread_id().unwrap(), Ordering::SeqCst);
                    p.running.fetch_add(1, Ordering::SeqCst);
                    p.hold_until(2);
                }),
                i,
                i + 1,
            );
        }
        p.running.store(0, Ordering::SeqCst);
        p.phase.store(1, Ordering::SeqCst);
        await_count(&p.running, 2, "hinted tasks running");
        p.phase.store(2, Ordering::SeqCst);
        for i in 0..2 {
            assert_eq!(
                ran_on[i].load(Ordering::SeqCst),
                i,
                "task hinted at worker {i}"
            );
        }
    });
}

#[test]
fn worker_threads_are_named_after_their_pool() {
    for kind in PoolKind::ALL {
        let tp = Pool::new(PoolOptions::new(kind, 2, "named")).unwrap();
        let name = Arc::new(Mutex::new(String::new()));
        let n = name.clone();
        tp.spawn(move || *n.lock().unwrap() = std::thread::current().name().unwrap().to_string());
        drop(tp);
        let name = name.lock().unwrap().clone();
        assert!(
            name == "named-w0" || name == "named-w1",
            "{kind}: thread name {name:?}"
        );
    }
}
