//! Shutting a pool down from inside one of its own tasks.
//!
//! Dropping a pool waits for its workers: they run every queued task, then exit, and the drop
//! joins them. When the last handle is dropped by a task running on one of those workers, the
//! dropping thread is itself a worker the shutdown waits for: it cannot join itself, and the
//! work-stealing pools' exit rule (every active worker blocked) never holds while it sits in
//! the drop. So a drop on a worker of the pool hands the whole shutdown (the same joins, in
//! the same order) to a short-lived thread, `<pool>-shutdown`, and returns at once; the
//! dropping task finishes, its worker goes back to the queues, and the pool drains and exits
//! exactly as a drop from outside would make it. The shutdown thread ends when the last worker
//! has been joined, so no thread outlives the pool's work.
//!
//! If the OS refuses that thread, the caller falls back to signalling the shutdown without
//! waiting: the workers still run what is queued and exit by themselves, unjoined.
#![forbid(unsafe_code)]

use super::current;
use crate::sync::{thread, Arc};

/// A pool's worker threads, by slot (`None`: a slot never started or already joined).
pub(crate) type Handles = Vec<Option<thread::JoinHandle<()>>>;

/// What a pool's shared state does at its drop.
pub(crate) trait ShutDown: Send + Sync + 'static {
    /// The pool's name (the shutdown thread is `<name>-shutdown`).
    fn name(&self) -> &str;
    /// The drop's protocol: signal the workers and join every one of `handles`.
    fn shut_down(&self, handles: Handles);
    /// Signals the shutdown without joining: the workers run what is queued and exit.
    fn signal_done(&self);
}

/// A pool's drop: runs the shutdown here, or, when the calling thread is one of the pool's own
/// workers (`pool_id` as `pool::current` records it), on a `<pool>-shutdown` thread, falling
/// back to [`ShutDown::signal_done`] if the OS refuses that thread.
pub(crate) fn drop_pool<S: ShutDown>(shared: &Arc<S>, pool_id: usize, handles: Handles) {
    if current::index_in(pool_id).is_none() {
        return shared.shut_down(handles);
    }
    let elsewhere = Arc::clone(shared);
    let spawned = thread::Builder::new()
        .name(format!("{}-shutdown", shared.name()))
        .spawn(move || elsewhere.shut_down(handles));
    if spawned.is_err() {
        shared.signal_done();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc::{self, RecvTimeoutError, Sender};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use crate::pool::{Pool, PoolEvent, PoolKind, PoolObserver, PoolOptions};

    /// Generous: the scenario takes microseconds; only a hang reaches it.
    const PATIENCE: Duration = Duration::from_secs(30);
    const QUEUED: usize = 64;

    /// Counts task panics. Only the pool holds it: its sender closes when the pool's shared
    /// state goes, i.e. when every worker and the shutdown thread have let go of the pool.
    struct Watch {
        panics: Arc<AtomicUsize>,
        _gone: Mutex<Sender<()>>,
    }

    impl PoolObserver for Watch {
        fn on_event(&self, _worker: Option<usize>, event: PoolEvent) {
            if event == (PoolEvent::TaskEnd { panicked: true }) {
                self.panics.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    /// The last `Arc<Pool>` is dropped inside one of the pool's own tasks, with tasks queued
    /// behind it and a child spawned by the dropping task after the drop. Runs on its own
    /// thread, waited for with a timeout, so a hang fails the test instead of hanging it.
    fn drop_in_own_task(kind: PoolKind, threads: usize) {
        let (gone_tx, gone_rx) = mpsc::channel::<()>();
        let panics = Arc::new(AtomicUsize::new(0));
        let watch = Arc::new(Watch {
            panics: panics.clone(),
            _gone: Mutex::new(gone_tx),
        });
        let (done_tx, done_rx) = mpsc::channel();
        let ran = Arc::new(AtomicUsize::new(0));
        let counted = ran.clone();
        std::thread::spawn(move || {
            let options = PoolOptions::new(kind, threads, "drop-inside").observer(watch);
            let pool = Arc::new(Pool::new(options).expect("pool starts"));
            let last = pool.clone();
            let child = counted.clone();
            pool.spawn(move || {
                drop(last);
                crate::pool::spawn_here(move || {
                    child.fetch_add(1, Ordering::SeqCst);
                })
                .expect("the dropping task still runs on a worker");
            });
            for _ in 0..QUEUED {
                let ran = counted.clone();
                pool.spawn(move || {
                    ran.fetch_add(1, Ordering::SeqCst);
                });
            }
            drop(pool);
            done_tx.send(()).expect("the test waits");
        });
        let what = format!("{kind} pool of {threads}");
        done_rx
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|_| panic!("{what}: the drop outside the pool hung"));
        assert_eq!(
            gone_rx.recv_timeout(PATIENCE),
            Err(RecvTimeoutError::Disconnected),
            "{what}: a pool thread never let go of the pool"
        );
        assert_eq!(
            ran.load(Ordering::SeqCst),
            QUEUED + 1,
            "{what}: every task runs"
        );
        assert_eq!(panics.load(Ordering::SeqCst), 0, "{what}: no task panicked");
    }

    #[test]
    fn dropping_the_last_handle_inside_a_task_runs_everything_and_ends_every_thread() {
        for kind in PoolKind::ALL {
            for threads in [1, 2, 4] {
                drop_in_own_task(kind, threads);
            }
        }
    }
}
