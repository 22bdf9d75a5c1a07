//! The five engine workloads of the benchmark reference, as plain op lists, and their
//! sequential evaluation.
#![forbid(unsafe_code)]

use crate::sync::{AtomicU64, Ordering};

/// One op of a workload: it writes `write` and reads `reads` (at most 3, distinct).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OpDesc {
    /// The var written.
    pub(crate) write: u32,
    reads: [u32; 3],
    read_count: u8,
}

impl OpDesc {
    pub(super) fn new(write: u32, reads: &[u32]) -> Self {
        let mut desc = OpDesc {
            write,
            reads: [0; 3],
            read_count: reads.len() as u8,
        };
        desc.reads[..reads.len()].copy_from_slice(reads);
        desc
    }

    /// The vars read.
    pub(crate) fn reads(&self) -> &[u32] {
        &self.reads[..usize::from(self.read_count)]
    }

    /// Folds the inputs into the output: `value[write] = mix(value[write], value[reads]..., k)`.
    /// Order matters (the mix is not commutative), so a wrong order changes the result.
    #[inline]
    pub(crate) fn apply(&self, index: u32, values: &[AtomicU64]) {
        let mut value = values[self.write as usize].load(Ordering::Relaxed);
        for &read in self.reads() {
            value = mix(value, values[read as usize].load(Ordering::Relaxed));
        }
        values[self.write as usize].store(mix(value, u64::from(index)), Ordering::Relaxed);
    }
}

/// A non-commutative 64-bit mix.
#[inline]
pub(super) fn mix(acc: u64, input: u64) -> u64 {
    (acc.rotate_left(23) ^ input)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(0x632b_e59b_d9b4_e019)
}

/// A workload: how many vars, and the ops in push order.
#[derive(Clone, Debug)]
pub(crate) struct Workload {
    /// Vars the ops use (`0..vars`).
    pub(crate) vars: usize,
    /// The ops, in push order.
    pub(crate) ops: Vec<OpDesc>,
}

impl Workload {
    /// 1024 vars; op k writes var k % 1024 and reads nothing.
    pub(crate) fn independent(ops: usize) -> Self {
        let vars = 1024;
        Workload {
            vars,
            ops: (0..ops)
                .map(|k| OpDesc::new((k % vars) as u32, &[]))
                .collect(),
        }
    }

    /// 1 var; every op writes it.
    pub(crate) fn chain(ops: usize) -> Self {
        Workload {
            vars: 1,
            ops: (0..ops).map(|_| OpDesc::new(0, &[])).collect(),
        }
    }

    /// 1000 vars; each op writes a uniform var and reads 0 to 3 distinct others (fixed seed).
    pub(crate) fn random_dag(ops: usize) -> Self {
        let vars = 1000u32;
        let mut rng = fastrand::Rng::with_seed(0x05ee_dda9);
        let ops = (0..ops)
            .map(|_| {
                let write = rng.u32(..vars);
                let mut reads: Vec<u32> = Vec::with_capacity(3);
                let count = rng.usize(0..=3);
                while reads.len() < count {
                    let read = rng.u32(..vars);
                    if read != write && !reads.contains(&read) {
                        reads.push(read);
                    }
                }
                OpDesc::new(write, &reads)
            })
            .collect();
        Workload {
            vars: vars as usize,
            ops,
        }
    }

    /// A `side x side` grid pushed row by row; cell (i, j) reads (i-1, j) and (i, j-1).
    pub(crate) fn wavefront(side: usize) -> Self {
        let cell = |i: usize, j: usize| (i * side + j) as u32;
        let mut ops = Vec::with_capacity(side * side);
        for i in 0..side {
            for j in 0..side {
                let mut reads = Vec::with_capacity(2);
                if i > 0 {
                    reads.push(cell(i - 1, j));
                }
                if j > 0 {
                    reads.push(cell(i, j - 1));
                }
                ops.push(OpDesc::new(cell(i, j), &reads));
            }
        }
        Workload {
            vars: side * side,
            ops,
        }
    }

    /// Op k (1-based) reads the var of its parent k / 2 and writes its own.
    pub(crate) fn binary_tree(ops: usize) -> Self {
        let ops = (1..=ops)
            .map(|k| {
                let parent: &[u32] = if k > 1 { &[(k / 2 - 1) as u32] } else { &[] };
                OpDesc::new((k - 1) as u32, parent)
            })
            .collect::<Vec<_>>();
        Workload {
            vars: ops.len(),
            ops,
        }
    }

    /// The value every var starts with.
    pub(crate) fn initial(var: usize) -> u64 {
        var as u64 + 1
    }

    /// Sets `values` to their initial state.
    pub(crate) fn reset(&self, values: &[AtomicU64]) {
        for (var, value) in values.iter().enumerate().take(self.vars) {
            value.store(Self::initial(var), Ordering::Relaxed);
        }
    }

    /// The hash of the first `vars` values.
    pub(crate) fn digest(&self, values: &[AtomicU64]) -> u64 {
        values[..self.vars]
            .iter()
            .fold(0, |acc, value| mix(acc, value.load(Ordering::Relaxed)))
    }

    /// The digest a sequential run produces.
    pub(crate) fn sequential_digest(&self) -> u64 {
        let values: Vec<AtomicU64> = (0..self.vars).map(|_| AtomicU64::new(0)).collect();
        self.reset(&values);
        for (index, op) in self.ops.iter().enumerate() {
            op.apply(index as u32, &values);
        }
        self.digest(&values)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn shapes_have_the_reference_sizes() {
        assert_eq!(Workload::independent(100_000).ops.len(), 100_000);
        assert_eq!(Workload::wavefront(317).ops.len(), 100_489);
        let tree = Workload::binary_tree(131_071);
        assert_eq!((tree.vars, tree.ops[2].reads()), (131_071, &[0u32][..]));
        let dag = Workload::random_dag(10_000);
        assert!(dag
            .ops
            .iter()
            .all(|op| op.reads().len() <= 3 && !op.reads().contains(&op.write)));
        assert!(dag.ops.iter().any(|op| op.reads().len() == 3));
    }

    #[test]
    fn order_changes_the_digest() {
        let chain = Workload::chain(3);
        let values: Vec<AtomicU64> = (0..1).map(|_| AtomicU64::new(0)).collect();
        chain.reset(&values);
        for index in [1u32, 0, 2] {
            chain.ops[index as usize].apply(index, &values);
        }
        assert_ne!(chain.digest(&values), chain.sequential_digest());
    }
}
