//! The worker loop: own queue, steal, spin, sleep (Eigen's `WorkerLoop` and `WaitForWork`).
//!
//! ```text
//! loop:
//!   cancelled?                      -> exit
//!   index >= active and retired?    -> exit            (resize)
//!   pop own queue | steal in partition | steal everywhere -> run it
//!   else spin (one spinner at most, bounded rounds: own queue, then global steals) -> run it
//!   else wait_for_work: prewait; precise emptiness check;
//!        found work  -> cancel_wait, take it
//!        retiring    -> cancel_wait, back to the top
//!        done and every active worker blocked and still nothing -> notify all, exit
//!        else commit_wait (sleep until a producer notifies)
//! ```
//! Why nothing is lost: a producer publishes its task before it notifies; a worker announces
//! itself (prewait) before its final check. Whatever the interleaving, either the check sees
//! the task or the notify sees the prewait (EventCount's contract). At shutdown the last
//! worker to block re-checks every queue after it counted itself, so a task submitted just
//! before the drop is still run; exited workers stay counted as blocked, so the others follow.
//!
//! The tasks a worker takes from its own queue one after another form a streak, which the
//! observer is told of (`on_streak_start` before the first, `on_streak_end` when the own
//! queue comes up empty or the worker leaves): a profiler times the streak, not each task.

use super::spinning::{MAX_AWAKE_FOR_SPINNING, SPIN_BUDGET};
use super::victims::decode_partition;
use super::{Shared, StealQueues, Task, RETIRED, RUNNING};
use crate::pool::counters::WorkerState;
use crate::pool::{current, PoolEvent};
use crate::sync::{spin_loop, Ordering};

/// What a worker does after `idle` returns.
enum Next {
    Run(Task),
    LookAgain,
    Exit,
}

/// Where the precise emptiness check found work.
enum NonEmpty {
    Slot(usize),
    Shared,
}

impl<Q: StealQueues> Shared<Q> {
    /// Body of worker thread `index`; `scheduler` is how tasks on it spawn onto this pool.
    pub(super) fn run_worker(&self, index: usize, scheduler: current::Scheduler) {
        current::enter(self.pool_id(), index, scheduler);
        self.queues.attach(index);
        let mut rng = fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15 ^ index as u64);
        // Whether the worker is in a streak: every task since the streak began came from its
        // own queue as the previous one ended (`PoolObserver::on_streak_start`).
        let mut streak = false;
        loop {
            if self.cancelled.load(Ordering::Relaxed) {
                break;
            }
            if index >= self.active.load(Ordering::Relaxed) && self.retire(index) {
                break;
            }
            let task = match self.queues.pop_local(index) {
                Some(task) => task,
                None => {
                    if streak {
                        streak = false;
                        self.observe_streak(index, false);
                    }
                    match self.search(index, rng.u32(..)) {
                        Some(task) => task,
                        None => match self.idle(index, &mut rng) {
                            Next::Run(task) => task,
                            Next::LookAgain => continue,
                            Next::Exit => break,
                        },
                    }
                }
            };
            if !streak {
                streak = true;
                self.observe_streak(index, true);
            }
            self.run_task(index, task);
        }
        if streak {
            self.observe_streak(index, false);
        }
        self.slots[index].counters.set_state(WorkerState::Idle);
        self.queues.detach(index);
    }

    /// Leaves slot `index` unless a concurrent grow wants it kept (see the module docs).
    fn retire(&self, index: usize) -> bool {
        let life = &self.slots[index].life;
        life.store(RETIRED, Ordering::SeqCst);
        if index < self.active.load(Ordering::SeqCst) {
            let kept = life.compare_exchange(RETIRED, RUNNING, Ordering::SeqCst, Ordering::SeqCst);
            return kept.is_err(); // Err: the grow claimed the slot for a new thread
        }
        true
    }

    /// Runs one task on worker `index`, counting it.
    pub(super) fn run_task(&self, index: usize, task: Task) {
        let counters = &self.slots[index].counters;
        counters.set_state(WorkerState::Running);
        self.observe(Some(index), PoolEvent::TaskStart);
        let panicked = self.panics.run(task);
        if panicked {
            counters.panicked();
        }
        counters.task_ran();
        self.observe(Some(index), PoolEvent::TaskEnd { panicked });
    }

    /// A streak of worker `index` begins (`start`) or ends, for the observer.
    #[inline]
    fn observe_streak(&self, index: usize, start: bool) {
        if let Some(observer) = &self.options.observer {
            if start {
                observer.on_streak_start(index);
            } else {
                observer.on_streak_end(index);
            }
        }
    }

    /// Own queue, then the steal partition, then everywhere.
    pub(super) fn find_task(&self, index: usize, random: u32) -> Option<Task> {
        if let Some(task) = self.queues.pop_local(index) {
            return Some(task);
        }
        self.search(index, random)
    }

    /// The steal partition, then everywhere (the own queue came up empty).
    fn search(&self, index: usize, random: u32) -> Option<Task> {
        self.slots[index].counters.set_state(WorkerState::Stealing);
        self.partition_steal(index, random)
            .or_else(|| self.global_steal(Some(index), random))
    }

    fn partition_steal(&self, index: usize, random: u32) -> Option<Task> {
        let packed = self.slots[index].partition.load(Ordering::Relaxed);
        if packed == 0 {
            return None;
        }
        let (start, limit) = decode_partition(packed);
        self.steal_in(Some(index), start, limit, random)
    }

    /// The shared injector, then every slot ever started, in a random coprime walk.
    pub(super) fn global_steal(&self, thief: Option<usize>, random: u32) -> Option<Task> {
        if let Some(task) = self.queues.steal_shared(thief) {
            self.count_steal(thief, None);
            return Some(task);
        }
        self.steal_in(thief, 0, self.started.load(Ordering::Acquire), random)
    }

    fn steal_in(
        &self,
        thief: Option<usize>,
        start: usize,
        limit: usize,
        random: u32,
    ) -> Option<Task> {
        for victim in self.victims.walk(start, limit, random) {
            if Some(victim) == thief || self.queues.is_empty(victim) {
                continue;
            }
            if let Some(task) = self.queues.steal(thief, victim) {
                self.count_steal(thief, Some(victim));
                return Some(task);
            }
        }
        if let Some(index) = thief {
            self.slots[index].counters.steal_attempted(false);
        }
        None
    }

    fn count_steal(&self, thief: Option<usize>, victim: Option<usize>) {
        if let Some(index) = thief {
            self.slots[index].counters.steal_attempted(true);
            self.observe(thief, PoolEvent::Steal { victim });
        }
    }

    /// Nothing found: spin if allowed, else sleep.
    fn idle(&self, index: usize, rng: &mut fastrand::Rng) -> Next {
        if self.may_spin() && self.spinning.start() {
            if let Some(task) = self.spin(index, rng) {
                return Next::Run(task);
            }
            if self.cancelled.load(Ordering::Relaxed) {
                return Next::Exit;
            }
        }
        self.wait_for_work(index, rng.u32(..))
    }

    fn may_spin(&self) -> bool {
        let awake = self
            .active
            .load(Ordering::Relaxed)
            .saturating_sub(self.blocked.load(Ordering::Relaxed));
        self.options.allow_spinning && awake <= MAX_AWAKE_FOR_SPINNING
    }

    /// The spin loop; the caller won [`SpinningState::start`](super::spinning::SpinningState).
    fn spin(&self, index: usize, rng: &mut fastrand::Rng) -> Option<Task> {
        let counters = &self.slots[index].counters;
        counters.spun();
        counters.set_state(WorkerState::Spinning);
        self.observe(Some(index), PoolEvent::SpinStart);
        let rounds = spin_rounds(self.active.load(Ordering::Relaxed));
        let mut found = None;
        for _ in 0..rounds {
            if self.cancelled.load(Ordering::Relaxed)
                || index >= self.active.load(Ordering::Relaxed)
            {
                break;
            }
            found = self.spin_round(index, rng.u32(..));
            if found.is_some() {
                break;
            }
        }
        let owed_a_task = self.spinning.stop();
        if found.is_none() && owed_a_task {
            // A producer skipped its notify because of us: one more round over every queue
            // (not just our own) before we may sleep.
            found = self.spin_round(index, rng.u32(..));
        }
        self.observe(Some(index), PoolEvent::SpinEnd);
        found
    }

    /// One look for work while spinning: our own queue, then every other. The own queue
    /// matters: an outside producer pushes to a random queue, often the spinner's own, and its
    /// notify wakes nobody when no worker sleeps (or is skipped because we spin); a spinner
    /// that looked only at the others would leave that task waiting out the whole spin budget. (Eigen's `Steal` visits every
    /// queue, the thief's own included.)
    #[inline]
    fn spin_round(&self, index: usize, random: u32) -> Option<Task> {
        self.queues
            .pop_local(index)
            .or_else(|| self.global_steal(Some(index), random))
    }

    /// Eigen's `WaitForWork`.
    fn wait_for_work(&self, index: usize, random: u32) -> Next {
        self.event_count.prewait();
        if let Some(place) = self.non_empty_queue(random) {
            self.event_count.cancel_wait();
            if self.cancelled.load(Ordering::Relaxed) {
                return Next::Exit;
            }
            return match self.take_from(place, index) {
                Some(task) => Next::Run(task),
                None => {
                    // The queue looked non-empty but its task is still being published (or a
                    // thief was faster): give the other thread a moment, then look again.
                    spin_loop();
                    Next::LookAgain
                }
            };
        }
        if index >= self.active.load(Ordering::SeqCst) {
            self.event_count.cancel_wait(); // retiring workers never sleep
            return Next::LookAgain;
        }
        let blocked = self.blocked.fetch_add(1, Ordering::SeqCst) + 1;
        if self.done.load(Ordering::SeqCst) && blocked == self.active.load(Ordering::SeqCst) {
            return self.maybe_exit(random);
        }
        self.sleep(index);
        self.blocked.fetch_sub(1, Ordering::SeqCst);
        Next::LookAgain
    }

    /// Every active worker is blocked and the pool is shutting down: leave, unless a final
    /// look finds work (then everyone keeps going; this thread must not pop it first, or the
    /// others could exit while the task it runs schedules more).
    fn maybe_exit(&self, random: u32) -> Next {
        self.event_count.cancel_wait();
        if self.non_empty_queue(random).is_some() {
            self.blocked.fetch_sub(1, Ordering::SeqCst);
            return Next::LookAgain;
        }
        self.event_count.notify(true);
        Next::Exit
    }

    fn sleep(&self, index: usize) {
        let counters = &self.slots[index].counters;
        counters.parked();
        counters.set_state(WorkerState::Parked);
        self.observe(Some(index), PoolEvent::Park);
        self.event_count.commit_wait(index);
        counters.woke();
        self.observe(Some(index), PoolEvent::Unpark);
    }

    /// The precise emptiness check: a queue that holds a task published before our prewait is
    /// never reported empty.
    fn non_empty_queue(&self, random: u32) -> Option<NonEmpty> {
        if !self.queues.shared_is_empty() {
            return Some(NonEmpty::Shared);
        }
        let started = self.started.load(Ordering::Acquire);
        self.victims
            .walk(0, started, random)
            .find(|&i| !self.queues.is_empty(i))
            .map(NonEmpty::Slot)
    }

    fn take_from(&self, place: NonEmpty, index: usize) -> Option<Task> {
        let thief = Some(index);
        match place {
            NonEmpty::Slot(victim) if victim == index => self.queues.pop_local(index),
            NonEmpty::Slot(victim) => self.queues.steal(thief, victim),
            NonEmpty::Shared => self.queues.steal_shared(thief),
        }
    }
}

/// Steal rounds one spin may make with `threads` workers.
fn spin_rounds(threads: usize) -> usize {
    if cfg!(loom) {
        1 // keep loom's state space small; the protocol does not depend on the count
    } else {
        SPIN_BUDGET / threads.max(1)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::{EigenPool, StealQueues};
    use crate::pool::{PoolKind, PoolOptions, Task};
    use crate::sync::{Arc, AtomicBool, Ordering};

    /// A spinner must see a task an outside producer pushed to its own queue: when no worker
    /// sleeps the producer's notify wakes nobody, so nobody else would take the task before the
    /// spin ends. (The test thread plays the owner of slot 0 of a pool without workers.)
    #[test]
    fn a_spin_round_takes_a_task_pushed_to_the_spinners_own_queue() {
        let pool = EigenPool::new(PoolOptions::new(PoolKind::Eigen, 0, "spin-own").max_threads(2))
            .expect("a pool without workers starts");
        let shared = &pool.shared;
        shared.started.store(2, Ordering::SeqCst);
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let task = Task::new(move || flag.store(true, Ordering::SeqCst));
        assert!(shared.queues.push_outside(0, task).is_ok());
        for random in [0, u32::MAX / 2, u32::MAX] {
            assert!(
                shared.global_steal(Some(0), random).is_none(),
                "a global steal skips the thief's own queue"
            );
        }
        let found = shared
            .spin_round(0, 7)
            .expect("the spin round looks at its own queue");
        shared.panics.run(found);
        assert!(ran.load(Ordering::SeqCst));
    }
}
