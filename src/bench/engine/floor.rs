//! The floors of the engine benchmarks: the cheapest ways this machine can hand a shape's ops
//! from the pushing thread to another thread that runs them, timed like an engine run (first
//! push to last op done) and checked against the sequential digest.
//!
//! # What a floor is
//! Every engine benchmark pushes its ops from one thread and runs them on others, so every
//! op's description crosses from the pusher's core to a worker's. A floor does that and
//! nothing more: no dependency is tracked, because one worker runs the ops in push order,
//! which is a valid order for every shape (each op's inputs were written by earlier ops), and
//! the digest proves it. An engine that tracks dependencies while ops arrive cannot beat
//! [`Floor::Spsc`] on this machine; [`Floor::PingPong`] is what it pays when every op waits for
//! a cache line to go to the other core and back.
//!
//! - [`Floor::Spsc`]: a bounded single-producer single-consumer ring (Lamport's, each side
//!   caching the other's index). The pusher writes an op's three words into the next slot and
//!   publishes its tail; the worker takes slots in order, runs them, and publishes its head.
//!   The pusher runs ahead up to the ring's capacity, so the per-op cost is the throughput of
//!   the handoff: slot lines and the tail's line moving to the worker, amortized over the ops
//!   a line carries.
//! - [`Floor::PingPong`]: a one-slot mailbox on one cache line: the pusher writes an op and its
//!   sequence number, the worker runs it and writes its acknowledgement on the same line, and
//!   the pusher waits for that before the next op. Per op the line goes to the worker and
//!   back: the latency of a dependency handed between cores, once per op.
//!
//! Both sides spin briefly and then yield, so a loaded machine slows a floor down instead of
//! stalling it.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use super::shapes::{OpDesc, Workload};
use crate::sync::{spin_loop, thread, Arc, AtomicU64, AtomicUsize, Ordering};

/// One of the floors (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Floor {
    /// A lock-free SPSC ring: the pusher runs ahead of one worker.
    Spsc,
    /// A one-slot mailbox: one cache-line round trip per op.
    PingPong,
}

impl Floor {
    /// Every floor, in the order they run.
    pub(crate) const ALL: [Floor; 2] = [Floor::Spsc, Floor::PingPong];

    /// The name in tables and JSON lines (where an engine's name goes).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Floor::Spsc => "floor-spsc",
            Floor::PingPong => "floor-pingpong",
        }
    }

    /// Runs every op of `workload` through this floor (`values`: one per var); returns the
    /// time from the first push to the last op done, and the digest.
    pub(crate) fn run(self, workload: &Workload, values: &'static [AtomicU64]) -> (Duration, u64) {
        workload.reset(values);
        let elapsed = match self {
            Floor::Spsc => spsc(&workload.ops, values),
            Floor::PingPong => ping_pong(&workload.ops, values),
        };
        (elapsed, workload.digest(values))
    }
}

/// An op as the three words that cross between the threads: its index and output, two reads,
/// the third read and the read count.
struct Slot([AtomicU64; 3]);

impl Slot {
    fn new() -> Self {
        Slot([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)])
    }

    fn store(&self, index: usize, op: &OpDesc) {
        let mut reads = [0u64; 3];
        for (word, &read) in reads.iter_mut().zip(op.reads()) {
            *word = u64::from(read);
        }
        let count = op.reads().len() as u64;
        self.0[0].store(
            (index as u64) << 32 | u64::from(op.write),
            Ordering::Relaxed,
        );
        self.0[1].store(reads[0] | reads[1] << 32, Ordering::Relaxed);
        self.0[2].store(reads[2] | count << 32, Ordering::Relaxed);
    }

    /// The op and its index.
    fn load(&self) -> (u32, OpDesc) {
        let words = [0, 1, 2].map(|word| self.0[word].load(Ordering::Relaxed));
        let reads = [words[1] as u32, (words[1] >> 32) as u32, words[2] as u32];
        let count = (words[2] >> 32) as usize;
        let op = OpDesc::new(words[0] as u32, &reads[..count]);
        ((words[0] >> 32) as u32, op)
    }
}

/// Spins on `ready` a little, then yields between looks; returns its first non-`None`.
fn wait_for<T>(mut ready: impl FnMut() -> Option<T>) -> T {
    let mut looks = 0u32;
    loop {
        if let Some(value) = ready() {
            return value;
        }
        looks += 1;
        if looks < 128 {
            spin_loop();
        } else {
            thread::yield_now();
        }
    }
}

/// Slots of the SPSC ring.
const RING: usize = 1024;

struct Ring {
    slots: Box<[Slot]>,
    /// Ops written (the pusher's).
    tail: CachePadded<AtomicUsize>,
    /// Ops taken (the worker's).
    head: CachePadded<AtomicUsize>,
}

fn spsc(ops: &[OpDesc], values: &'static [AtomicU64]) -> Duration {
    let ring = Arc::new(Ring {
        slots: (0..RING).map(|_| Slot::new()).collect(),
        tail: CachePadded::new(AtomicUsize::new(0)),
        head: CachePadded::new(AtomicUsize::new(0)),
    });
    let count = ops.len();
    let worker = {
        let ring = ring.clone();
        thread::spawn(move || {
            let mut written = 0;
            for taken in 0..count {
                if taken == written {
                    written = wait_for(|| {
                        let tail = ring.tail.load(Ordering::Acquire);
                        (tail > taken).then_some(tail)
                    });
                }
                let (index, op) = ring.slots[taken % RING].load();
                op.apply(index, values);
                ring.head.store(taken + 1, Ordering::Release);
            }
        })
    };
    let start = Instant::now();
    let mut taken = 0;
    for (index, op) in ops.iter().enumerate() {
        if index - taken == RING {
            taken = wait_for(|| {
                let head = ring.head.load(Ordering::Acquire);
                (index - head < RING).then_some(head)
            });
        }
        ring.slots[index % RING].store(index, op);
        ring.tail.store(index + 1, Ordering::Release);
    }
    worker.join().expect("the floor's worker runs plain ops");
    start.elapsed()
}

/// The ping-pong's line: the op, its sequence number (pusher) and the acknowledgement (worker).
struct Mailbox {
    slot: Slot,
    sent: AtomicUsize,
    done: AtomicUsize,
}

fn ping_pong(ops: &[OpDesc], values: &'static [AtomicU64]) -> Duration {
    let mailbox = Arc::new(CachePadded::new(Mailbox {
        slot: Slot::new(),
        sent: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
    }));
    let count = ops.len();
    let worker = {
        let mailbox = mailbox.clone();
        thread::spawn(move || {
            for sequence in 1..=count {
                wait_for(|| (mailbox.sent.load(Ordering::Acquire) == sequence).then_some(()));
                let (index, op) = mailbox.slot.load();
                op.apply(index, values);
                mailbox.done.store(sequence, Ordering::Release);
            }
        })
    };
    let start = Instant::now();
    for (index, op) in ops.iter().enumerate() {
        mailbox.slot.store(index, op);
        mailbox.sent.store(index + 1, Ordering::Release);
        wait_for(|| (mailbox.done.load(Ordering::Acquire) == index + 1).then_some(()));
    }
    worker.join().expect("the floor's worker runs plain ops");
    start.elapsed()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn values(workload: &Workload) -> &'static [AtomicU64] {
        Box::leak((0..workload.vars).map(|_| AtomicU64::new(0)).collect())
    }

    #[test]
    fn every_floor_runs_every_shape_in_a_valid_order() {
        let shapes = [
            Workload::chain(3000),
            Workload::random_dag(3000),
            Workload::wavefront(40),
            Workload::binary_tree(3000),
        ];
        for workload in shapes {
            let values = values(&workload);
            for floor in Floor::ALL {
                let (_, digest) = floor.run(&workload, values);
                assert_eq!(digest, workload.sequential_digest(), "{}", floor.as_str());
            }
        }
    }

    #[test]
    fn a_slot_carries_the_op_and_its_index() {
        let slot = Slot::new();
        for op in [
            OpDesc::new(7, &[]),
            OpDesc::new(u32::MAX, &[1, 2, u32::MAX]),
        ] {
            slot.store(123_456, &op);
            assert_eq!(slot.load(), (123_456, op));
        }
    }
}
