//! [`PreparedOp`]: everything a push of one workload op needs, computed once per run.
#![forbid(unsafe_code)]

use crate::engine::{self, EngineKind, OpName, Var};
use crate::workload::{Dtype, Graph, OpDecl, TensorId};

use super::call::KernelCall;
use super::counters::Lane;
use super::error::RunError;
use super::storage::OperandPlan;

/// One op, ready to push any number of times.
#[derive(Debug)]
pub(super) struct PreparedOp {
    /// Its interned name.
    pub(super) name: OpName,
    /// Where the engine runs it.
    pub(super) ctx: engine::Context,
    /// Which queue.
    pub(super) prop: engine::FnProperty,
    /// Its priority.
    pub(super) priority: i32,
    /// Vars it reads (operands and `also_reads`, without those it writes).
    pub(super) const_vars: Vec<Var>,
    /// Vars it writes (operands and `also_writes`).
    pub(super) mutable_vars: Vec<Var>,
    /// The tensors its kernel locks and gets.
    pub(super) operands: OperandPlan,
    /// The kernel and its parameters.
    pub(super) call: KernelCall,
    /// The graph's FLOP estimate, counted for kernels that report none.
    pub(super) flops_estimate: f64,
    /// Slot of its lane in the run's counters.
    pub(super) lane_slot: usize,
}

impl PreparedOp {
    /// Prepares `op` of `graph` with `vars` (one per tensor) for `engine`; `lanes` collects
    /// the lanes seen so far (its index is the op's lane slot).
    pub(super) fn new(
        graph: &Graph,
        op: &OpDecl,
        vars: &[Var],
        engine: EngineKind,
        lanes: &mut Vec<Lane>,
    ) -> Self {
        let var_list = |ids: Vec<TensorId>| -> Vec<Var> {
            ids.into_iter().map(|id| vars[id.index()].clone()).collect()
        };
        let prop = op.property;
        let lane = Lane::of(engine, op.device, prop);
        let lane_slot = lanes
            .iter()
            .position(|seen| *seen == lane)
            .unwrap_or_else(|| {
                lanes.push(lane);
                lanes.len() - 1
            });
        let indices = |ids: &[TensorId]| ids.iter().map(|id| id.index()).collect();
        PreparedOp {
            name: OpName::new(&op.name),
            ctx: op.device,
            prop,
            priority: op.priority,
            const_vars: var_list(op.const_vars()),
            mutable_vars: var_list(op.mutable_vars()),
            operands: OperandPlan::new(indices(&op.reads), indices(&op.writes)),
            call: KernelCall::decode(graph, op),
            flops_estimate: graph.op_flops(op) as f64,
            lane_slot,
        }
    }
}

/// Refuses a graph whose compute kernels touch a tensor that is not `f32` (the kernels
/// compute in `f32` only; `fold` and `sleep_us` take any tensor).
pub(super) fn check_dtypes(graph: &Graph) -> Result<(), RunError> {
    for op in graph.ops.iter().filter(|op| op.kernel.needs_one_dtype()) {
        let touched = op.reads.iter().chain(&op.writes);
        if let Some(tensor) = touched
            .map(|id| graph.tensor(*id))
            .find(|tensor| tensor.dtype != Dtype::F32)
        {
            return Err(RunError::UnsupportedDtype {
                tensor: tensor.name.clone(),
                dtype: tensor.dtype,
                op: op.name.clone(),
                kernel: op.kernel.name(),
            });
        }
    }
    Ok(())
}
