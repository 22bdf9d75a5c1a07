//! The tensors of a run: one [`Tensor`] per declared tensor, each behind its own
//! reader-writer lock, and how an op borrows its operands (see the locking rule in the
//! [driver docs](super)).
#![forbid(unsafe_code)]

use crate::kernels::Tensor;
use crate::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use crate::workload::{Init, TensorDecl};

use super::error::RunError;

/// How an op holds one tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Access {
    /// It only reads it: a read lock.
    Read,
    /// It writes it (and may read it): a write lock.
    Write,
}

/// An op's kernel operands, by tensor index: what to lock and how to hand them over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct OperandPlan {
    /// Every tensor the kernel touches, once, in ascending index order (the lock order).
    pub(super) locks: Vec<(usize, Access)>,
    /// The kernel's inputs in operand order (may repeat, may name an output).
    pub(super) reads: Vec<usize>,
    /// The kernel's outputs in operand order (distinct).
    pub(super) writes: Vec<usize>,
}

impl OperandPlan {
    /// The plan for a kernel reading `reads` and writing `writes` (tensor indices).
    pub(super) fn new(reads: Vec<usize>, writes: Vec<usize>) -> Self {
        let mut locks: Vec<(usize, Access)> = writes
            .iter()
            .map(|&id| (id, Access::Write))
            .chain(reads.iter().map(|&id| (id, Access::Read)))
            .collect();
        // Writes sort before reads of the same tensor, so dedup keeps the write.
        locks.sort_by_key(|&(id, access)| (id, access == Access::Read));
        locks.dedup_by_key(|&mut (id, _)| id);
        OperandPlan {
            locks,
            reads,
            writes,
        }
    }
}

/// A held lock.
enum Guard<'a> {
    Read(RwLockReadGuard<'a, Tensor>),
    Write(RwLockWriteGuard<'a, Tensor>),
}

/// Every tensor of a run.
#[derive(Debug)]
pub(super) struct TensorStore {
    cells: Vec<RwLock<Tensor>>,
}

impl TensorStore {
    /// Allocates and initialises every tensor of `decls`.
    pub(super) fn allocate(decls: &[TensorDecl]) -> Result<Self, RunError> {
        let cells = decls
            .iter()
            .map(|decl| initial_tensor(decl).map(RwLock::new))
            .collect::<Result<_, _>>()?;
        Ok(TensorStore { cells })
    }

    /// Number of tensors.
    pub(super) fn len(&self) -> usize {
        self.cells.len()
    }

    /// A copy of tensor `index` (waits for an op writing it).
    pub(super) fn snapshot(&self, index: usize) -> Tensor {
        self.cells[index].read().clone()
    }

    /// A hash of every tensor's bits, in index order.
    pub(super) fn checksum(&self) -> u64 {
        self.cells.iter().fold(FNV_OFFSET, |hash, cell| {
            fnv_step(hash, cell.read().checksum())
        })
    }

    /// Locks `plan`'s tensors in its (ascending) order and calls `body(reads, writes)` with
    /// the kernel's operands; an input that is also an output is handed over as a copy made
    /// before `body` runs.
    pub(super) fn with_operands<R>(
        &self,
        plan: &OperandPlan,
        body: impl FnOnce(&[&Tensor], &mut [&mut Tensor]) -> R,
    ) -> R {
        let mut guards: Vec<Guard<'_>> = plan
            .locks
            .iter()
            .map(|&(index, access)| match access {
                Access::Read => Guard::Read(self.cells[index].read()),
                Access::Write => Guard::Write(self.cells[index].write()),
            })
            .collect();
        let aliased = copies_of_written_inputs(plan, &guards);
        let mut read_refs: Vec<(usize, &Tensor)> = Vec::with_capacity(guards.len());
        let mut write_refs: Vec<Option<(usize, &mut Tensor)>> = Vec::with_capacity(guards.len());
        for (&(index, _), guard) in plan.locks.iter().zip(guards.iter_mut()) {
            match guard {
                Guard::Read(tensor) => read_refs.push((index, &**tensor)),
                Guard::Write(tensor) => write_refs.push(Some((index, &mut **tensor))),
            }
        }
        let reads: Vec<&Tensor> = plan
            .reads
            .iter()
            .map(|&index| find(&aliased, index).or_else(|| find(&read_refs, index)))
            .map(|tensor| tensor.expect("every read is locked or copied"))
            .collect();
        let mut writes: Vec<&mut Tensor> = plan
            .writes
            .iter()
            .map(|&index| take_write(&mut write_refs, index))
            .collect();
        body(&reads, &mut writes)
    }
}

/// Copies of the inputs that are also outputs (write-locked), one per tensor.
fn copies_of_written_inputs(plan: &OperandPlan, guards: &[Guard<'_>]) -> Vec<(usize, Tensor)> {
    let mut copies: Vec<(usize, Tensor)> = Vec::new();
    for &index in &plan.reads {
        if copies.iter().any(|(copied, _)| *copied == index) {
            continue;
        }
        let slot = plan.locks.iter().position(|&(id, _)| id == index);
        if let Some(Guard::Write(tensor)) = slot.map(|slot| &guards[slot]) {
            copies.push((index, (**tensor).clone()));
        }
    }
    copies
}

fn find<T: std::borrow::Borrow<Tensor>>(refs: &[(usize, T)], index: usize) -> Option<&Tensor> {
    refs.iter()
        .find(|(id, _)| *id == index)
        .map(|(_, tensor)| tensor.borrow())
}

fn take_write<'a>(refs: &mut [Option<(usize, &'a mut Tensor)>], index: usize) -> &'a mut Tensor {
    let slot = refs
        .iter()
        .position(|entry| matches!(entry, Some((id, _)) if *id == index))
        .expect("every write is locked once");
    refs[slot].take().expect("writes are distinct").1
}

/// The tensor `decl` declares, filled per its `init`.
fn initial_tensor(decl: &TensorDecl) -> Result<Tensor, RunError> {
    let out_of_memory = || RunError::OutOfMemory {
        tensor: decl.name.clone(),
        bytes: decl.elements().saturating_mul(4),
    };
    let len = usize::try_from(decl.elements()).map_err(|_| out_of_memory())?;
    let mut data: Vec<f32> = Vec::new();
    data.try_reserve_exact(len).map_err(|_| out_of_memory())?;
    match decl.init {
        Init::Zeros => data.resize(len, 0.0),
        Init::Ones => data.resize(len, 1.0),
        Init::Random => {
            // The values of `Tensor::random(shape, seed)`, into the reserved buffer.
            let mut rng = fastrand::Rng::with_seed(name_seed(&decl.name));
            data.extend((0..len).map(|_| rng.f32() * 2.0 - 1.0));
        }
    }
    Ok(Tensor::from_vec(&decl.shape, data).expect("the length is the shape's product"))
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

fn fnv_step(hash: u64, value: u64) -> u64 {
    (hash ^ value).wrapping_mul(FNV_PRIME)
}

/// The seed of a random tensor: FNV-1a of its name, so a tensor starts from the same values
/// in every run, whatever else the workload declares.
pub(super) fn name_seed(name: &str) -> u64 {
    name.bytes()
        .fold(FNV_OFFSET, |hash, byte| fnv_step(hash, u64::from(byte)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Context, Dtype};

    fn decl(name: &str, shape: &[usize], init: Init) -> TensorDecl {
        TensorDecl {
            name: name.to_string(),
            shape: shape.to_vec(),
            dtype: Dtype::F32,
            device: Context::Cpu(0),
            init,
        }
    }

    #[test]
    fn random_tensors_are_tensor_random_seeded_by_name() {
        let tensor = initial_tensor(&decl("w0", &[3, 4], Init::Random)).unwrap();
        assert_eq!(tensor, Tensor::random(&[3, 4], name_seed("w0")));
        let other = initial_tensor(&decl("w1", &[3, 4], Init::Random)).unwrap();
        assert_ne!(tensor, other);
        let ones = initial_tensor(&decl("b", &[2], Init::Ones)).unwrap();
        assert_eq!(ones.data, [1.0, 1.0]);
    }

    #[test]
    fn lock_plan_is_ascending_with_one_write_lock_per_written_tensor() {
        let plan = OperandPlan::new(vec![5, 2, 5, 7], vec![5, 1]);
        assert_eq!(
            plan.locks,
            [
                (1, Access::Write),
                (2, Access::Read),
                (5, Access::Write),
                (7, Access::Read)
            ]
        );
    }

    #[test]
    fn an_input_that_is_also_an_output_is_read_before_the_write() {
        let decls = [decl("x", &[2], Init::Ones), decl("y", &[2], Init::Zeros)];
        let store = TensorStore::allocate(&decls).unwrap();
        // out = x + y + x, written into x: every input must be the old x.
        let plan = OperandPlan::new(vec![0, 1, 0], vec![0]);
        store.with_operands(&plan, |reads, writes| {
            assert_eq!(reads.len(), 3);
            for i in 0..2 {
                writes[0].data[i] = reads[0].data[i] + reads[1].data[i] + reads[2].data[i];
            }
        });
        assert_eq!(store.snapshot(0).data, [2.0, 2.0]);
    }
}
