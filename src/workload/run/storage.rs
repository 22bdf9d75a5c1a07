//! The tensors of a run: one [`Tensor`] per declared tensor, each behind its own
//! reader-writer lock, and how an op borrows its operands (see the locking rule in the
//! [driver docs](super)).
#![forbid(unsafe_code)]

use crate::kernels::Tensor;
use crate::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use crate::workload::{Graph, Init, TensorDecl};

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
    /// Allocates and initialises every tensor of `decls` (check first with
    /// [`check_memory`]).
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

/// Where [`memory_available`] reads.
const MEMINFO: &str = "/proc/meminfo";

/// Fails, before anything is allocated, when `graph`'s run needs more memory than is
/// available ([`memory_needed`], [`check_fits`]).
pub(super) fn check_memory(graph: &Graph) -> Result<(), RunError> {
    check_fits(memory_needed(graph), memory_available())
}

/// Bytes a run of `graph` holds at least: every tensor, plus the copies one op takes of the
/// tensors it reads and writes ([`TensorStore::with_operands`]), for the op whose copies
/// are largest. A lower bound: ops running at once each hold their own copies.
pub(super) fn memory_needed(graph: &Graph) -> u64 {
    let in_place_copies = graph
        .ops
        .iter()
        .map(|op| {
            let mut updated: Vec<_> = op
                .writes
                .iter()
                .filter(|id| op.reads.contains(id))
                .collect();
            updated.dedup(); // copies_of_written_inputs takes one per tensor
            updated.iter().fold(0u64, |sum, &&id| {
                sum.saturating_add(graph.tensor(id).held_bytes())
            })
        })
        .max()
        .unwrap_or(0);
    graph.tensor_bytes().saturating_add(in_place_copies)
}

/// Fails when `needed` bytes exceed the `available` memory, before anything is allocated
/// (an allocation that fits the address space but not the memory ends in the OOM killer,
/// with no message). `None`: unknown, no check (the loader's fixed cap still holds).
pub(super) fn check_fits(needed: u64, available: Option<u64>) -> Result<(), RunError> {
    match available {
        Some(available) if needed > available => Err(RunError::NotEnoughMemory {
            needed,
            available,
            source_name: "MemAvailable in /proc/meminfo",
        }),
        _ => Ok(()),
    }
}

/// The memory available for new allocations, in bytes: `MemAvailable` of `/proc/meminfo`
/// (Linux), `None` where it cannot be read. A run whose tensors need more is refused
/// ([`RunError::NotEnoughMemory`]).
///
/// ```
/// if let Some(bytes) = enginetop::workload::run::memory_available() {
///     println!("{} MiB available", bytes >> 20);
/// }
/// ```
pub fn memory_available() -> Option<u64> {
    mem_available_in(&std::fs::read_to_string(MEMINFO).ok()?)
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes (the file says kB, meaning KiB).
fn mem_available_in(meminfo: &str) -> Option<u64> {
    let line = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemAvailable:"))?;
    let kib = line.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?;
    Some(kib.saturating_mul(1024))
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
            device: Context::cpu(0),
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
    fn tensors_that_exceed_the_available_memory_are_refused_with_sizes_and_the_fix() {
        let decls = [
            decl("x", &[1 << 28], Init::Zeros),
            decl("y", &[1 << 28], Init::Ones),
        ];
        let needed = decls.iter().map(TensorDecl::held_bytes).sum();
        assert_eq!(needed, 2 << 30);
        assert!(check_fits(needed, Some(3 << 30)).is_ok());
        assert!(check_fits(needed, None).is_ok(), "unknown memory: no check");
        let message = check_fits(needed, Some(1536 << 20))
            .unwrap_err()
            .to_string();
        assert_eq!(
            message,
            "the workload's tensors need 2.0 GiB, but only 1.5 GiB of memory is available \
             (MemAvailable in /proc/meminfo); make the workload smaller with --set (e.g. a \
             smaller size or batch)"
        );
    }

    #[test]
    fn an_op_that_reads_and_writes_a_tensor_needs_room_for_its_copy() {
        let load =
            |text: &str| crate::workload::load_str(text, "t.toml", &Default::default()).unwrap();
        let chain = load(
            r#"description = "in place"
               tensor = [{ name = "x", shape = [1024] }, { name = "y", shape = [256] }]
               [[op]]
               name = "step"
               kernel = "fold"
               reads = ["x"]
               writes = ["x"]
            "#,
        );
        assert_eq!(memory_needed(&chain), (1024 + 256 + 1024) * 4);
        let apart = load(
            r#"description = "no aliasing"
               tensor = [{ name = "x", shape = [1024] }, { name = "y", shape = [256] }]
               [[op]]
               name = "step"
               kernel = "fold"
               reads = ["x"]
               writes = ["y"]
            "#,
        );
        assert_eq!(memory_needed(&apart), (1024 + 256) * 4);
    }

    #[test]
    fn mem_available_is_read_from_meminfo_in_kib() {
        let meminfo = "MemTotal:       16000000 kB\nMemFree:  100 kB\nMemAvailable:    2048 kB\n";
        assert_eq!(mem_available_in(meminfo), Some(2 << 20));
        assert_eq!(mem_available_in("MemTotal: 5 kB\n"), None);
        assert_eq!(mem_available_in("MemAvailable: lots\n"), None);
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
