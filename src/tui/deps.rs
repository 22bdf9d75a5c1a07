//! What an op read, wrote and waited on, for the op detail: the run's graph joined with the
//! engine's op ids.
//!
//! # Where it comes from
//! The run's driver reports its graph ([`GraphObserver`]): the iteration's shape (ops in push
//! order, the vars each reads and writes) once a run starts, then, from each iteration op's
//! body, which op of which iteration the engine's op id was ([`OpRun`]). Live, a [`RunLog`]
//! is hooked as that observer (ahead of a recorder, which it forwards to); a replay feeds one
//! the recording's shape and op-run frames. Op ids are the engine's, the ones the op's
//! events and so its timeline span carry, so a span finds its op run by its id.
//!
//! # The edges: the engine's own
//! The engine orders the ops touching a var in push order: a read waits for the var's last
//! writer, a write for the readers since that write and, with none, for the writer. That is
//! [`crate::analysis`]'s edge rule (one implementation, `predecessors`), applied here to the
//! ops as the driver pushes them: iteration `k - 1`'s ops, its `iteration_end` marker (which
//! reads every var), then iteration `k`'s ops and marker. Two iterations hold every edge into
//! iteration `k`: a var's last writer before an op of `k` is in `k` or, the var being
//! written every iteration, in `k - 1`; the readers since that write are in `k - 1` after it,
//! the marker, or `k`. A var no iteration op writes was written by the setup ops, which are
//! all done before the first iteration is pushed: nothing waits on them. Iteration 0 has
//! no iteration before it: its ops wait only on each other.
//!
//! # Finding ids
//! The engine numbers its pushes in order, so op ids grow with (iteration, index): one sort
//! by op id serves both lookups (an op id's run; the id of op `index` of `iteration`). The
//! markers report no op run: the marker of iteration `k` is the `iteration_end` span whose
//! id lies between the last op of `k` and the first of `k + 1`.
//!
//! # Bounds and concurrency
//! Op runs arrive from every worker ([`GraphObserver::ran`]): each takes the log's lock once
//! to push onto the open chunk; a full chunk ([`CHUNK`] runs) is sorted and sealed (an
//! immutable shared slice), and past the log's capacity (the span store's, twice over: the
//! spans held keep their runs) the oldest sealed chunk goes. A [`RunLog::snapshot`] clones
//! the sealed chunks' handles and copies the open chunk, as the span store's does, so the
//! lock is held for at most [`CHUNK`] copies. Deps are computed on demand, for the one op
//! whose detail is drawn ([`OpGraph::deps`]): a frame carries the shape and the runs, never
//! every retained op's deps (131,072 of them, ten frames a second).
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::fmt;

use crate::analysis::{predecessors, EdgeKind, Pred, RanGraph, RanOp};
use crate::profiler::spans::{self, OpSpan, SpanSnapshot};
use crate::record::graph::{GraphObserver, GraphShape, OpRun};
use crate::sync::Mutex;
use crate::workload::run::ITERATION_END;

// Immutable shared slices and the shape's edges: no protocol for loom to model, so `std`'s
// (whose `Arc`, unlike loom's, also lets the graph derive `PartialEq`).
type Chunk = std::sync::Arc<[OpRun]>;
type Edges = std::sync::Arc<ShapeEdges>;

/// Op runs a chunk holds: the unit sorted, sealed, shared and dropped.
pub(crate) const CHUNK: usize = spans::CHUNK;

/// The op runs a [`RunLog`] keeps by default: twice the span store's spans.
pub(crate) const DEFAULT_CAPACITY: usize = 2 * spans::DEFAULT_CAPACITY;

/// What an op read, wrote and waited on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct OpDeps {
    /// The vars it read, by name (read-modify-write ones included).
    pub(crate) reads: Vec<String>,
    /// The vars it wrote, by name.
    pub(crate) writes: Vec<String>,
    /// The ops that had to finish before it could start, each with the edge's reason.
    pub(crate) waited_on: Vec<WaitedOn>,
}

/// One op another waited on, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WaitedOn {
    /// Its op id (`None` when its run is no longer, or was never, seen).
    pub(crate) op: Option<u64>,
    /// Its name.
    pub(crate) name: String,
    /// Its iteration.
    pub(crate) iteration: u64,
    /// Why the later op waited for it.
    pub(crate) kind: EdgeKind,
    /// The var both touch.
    pub(crate) var: String,
}

/// `RAW`, `WAR`, `WAW`: an edge kind in a few letters.
pub(crate) fn abbreviation(kind: EdgeKind) -> &'static str {
    match kind {
        EdgeKind::ReadAfterWrite => "RAW",
        EdgeKind::WriteAfterRead => "WAR",
        EdgeKind::WriteAfterWrite => "WAW",
    }
}

impl fmt::Display for WaitedOn {
    /// `op 412 conv1 (RAW on w1)`, or `conv1 of iteration 3 (RAW on w1)` without its id.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.op {
            Some(op) => write!(f, "op {op} {}", self.name)?,
            None => write!(f, "{} of iteration {}", self.name, self.iteration)?,
        }
        write!(f, " ({} on {})", abbreviation(self.kind), self.var)
    }
}

/// A position in the ops as pushed: op `index` of `iteration`, or its marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Op { iteration: u64, index: usize },
    Marker { iteration: u64 },
}

/// A shape with the edges into each op of an iteration (see the module docs).
#[derive(Debug, PartialEq, Eq)]
struct ShapeEdges {
    shape: GraphShape,
    /// Iteration 0: into op `i` (and the marker, `N`), over positions `0..=N`.
    first: Vec<Vec<Pred>>,
    /// Later iterations: into op `i` (and the marker, `N`), over positions `0..2N + 2`
    /// (the iteration before, its marker, this one).
    later: Vec<Vec<Pred>>,
}

impl ShapeEdges {
    fn new(shape: &GraphShape) -> ShapeEdges {
        let ops = shape.ops.len();
        let one = ops + 1;
        let first = predecessors(&pushed(shape, 1));
        let later = predecessors(&pushed(shape, 2)).split_off(one);
        ShapeEdges {
            shape: shape.clone(),
            first,
            later,
        }
    }

    /// The edges into op `index` of `iteration` (`index` = the op count: its marker).
    fn into(&self, iteration: u64, index: usize) -> &[Pred] {
        let edges = if iteration == 0 {
            &self.first
        } else {
            &self.later
        };
        edges.get(index).map_or(&[], Vec::as_slice)
    }

    /// What position `position` of the edges into an op of `iteration` is.
    fn slot(&self, iteration: u64, position: usize) -> Slot {
        let one = self.shape.ops.len() + 1;
        let (iteration, index) = match iteration {
            0 => (0, position),
            k if position < one => (k - 1, position),
            k => (k, position - one),
        };
        match index == self.shape.ops.len() {
            true => Slot::Marker { iteration },
            false => Slot::Op { iteration, index },
        }
    }
}

/// `iterations` of `shape`'s ops as the driver pushes them, each followed by its marker.
fn pushed(shape: &GraphShape, iterations: usize) -> RanGraph {
    let op = |name: &str, reads: Vec<usize>, writes: Vec<usize>| RanOp {
        name: name.to_string(),
        device: 0,
        reads,
        writes,
        time: std::time::Duration::ZERO,
    };
    let widen = |vars: &[u32]| vars.iter().map(|&var| var as usize).collect();
    let marker = op(ITERATION_END, (0..shape.vars.len()).collect(), Vec::new());
    let iteration = shape
        .ops
        .iter()
        .map(|graph_op| {
            op(
                &graph_op.name,
                widen(&graph_op.reads),
                widen(&graph_op.writes),
            )
        })
        .chain(std::iter::once(marker));
    let ops: Vec<RanOp> = iteration.collect();
    RanGraph {
        ops: ops
            .iter()
            .cycle()
            .take(ops.len() * iterations)
            .cloned()
            .collect(),
        vars: shape.vars.clone(),
        devices: vec![crate::device::identity::Lane::CpuWorkers(0)],
        wall: std::time::Duration::ZERO,
    }
}

/// The graph as a frame carries it: the shape's edges and the op runs held (each chunk
/// sorted by op id). The default knows no graph: every op's deps are "not recorded".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct OpGraph {
    edges: Option<Edges>,
    runs: Vec<Chunk>,
}

impl OpGraph {
    #[cfg(test)]
    /// `shape`'s graph with `runs` (a test's, a one-off's).
    pub(crate) fn new(shape: &GraphShape, runs: Vec<OpRun>) -> OpGraph {
        let runs = runs.chunks(CHUNK).map(sorted).collect();
        OpGraph {
            edges: Some(Edges::new(ShapeEdges::new(shape))),
            runs,
        }
    }

    /// What `span`'s op read, wrote and waited on; `None` where its run is not held (a setup
    /// op, a failed one, one older than the runs kept) or the graph is not known. The
    /// iteration markers among `spans` give the markers' ids.
    pub(crate) fn deps(&self, span: &OpSpan, spans: &SpanSnapshot) -> Option<OpDeps> {
        let markers = |after: u64, before: u64| {
            spans
                .iter()
                .filter(|other| other.name.as_str() == ITERATION_END)
                .map(|other| other.op)
                .filter(|&op| after < op && op < before)
                .min()
        };
        self.deps_of(span.op, span.name.as_str(), markers)
    }

    /// What op `op` (named `name`) read, wrote and waited on; `markers(after, before)` is
    /// the id of the `iteration_end` op between those two ids, if one is known.
    pub(crate) fn deps_of(
        &self,
        op: u64,
        name: &str,
        markers: impl Fn(u64, u64) -> Option<u64>,
    ) -> Option<OpDeps> {
        let edges = self.edges.as_deref()?;
        let shape = &edges.shape;
        let (iteration, index) = match self.run_of(op) {
            Some(run) => (run.iteration, run.index as usize),
            None if name == ITERATION_END => {
                let iteration = self.run_before(op)?.iteration;
                (self.marker_id(edges, iteration, &markers) == Some(op)).then_some(())?;
                (iteration, shape.ops.len())
            }
            None => return None,
        };
        let var_names = |vars: &[u32]| vars.iter().map(|&var| var_name(shape, var)).collect();
        let (reads, writes) = match shape.ops.get(index) {
            Some(graph_op) => (var_names(&graph_op.reads), var_names(&graph_op.writes)),
            None => (shape.vars.clone(), Vec::new()),
        };
        let waited_on = edges
            .into(iteration, index)
            .iter()
            .map(|pred| self.waited_on(edges, iteration, pred, &markers))
            .collect();
        Some(OpDeps {
            reads,
            writes,
            waited_on,
        })
    }

    fn waited_on(
        &self,
        edges: &ShapeEdges,
        iteration: u64,
        pred: &Pred,
        markers: &impl Fn(u64, u64) -> Option<u64>,
    ) -> WaitedOn {
        let shape = &edges.shape;
        let (op, name, iteration) = match edges.slot(iteration, pred.op) {
            Slot::Op { iteration, index } => (
                self.id_of(iteration, index),
                shape.ops[index].name.clone(),
                iteration,
            ),
            Slot::Marker { iteration } => (
                self.marker_id(edges, iteration, markers),
                ITERATION_END.to_string(),
                iteration,
            ),
        };
        WaitedOn {
            op,
            name,
            iteration,
            kind: pred.kind,
            var: var_name(shape, pred.var as u32),
        }
    }

    /// The run of op id `op`, if held.
    fn run_of(&self, op: u64) -> Option<OpRun> {
        self.runs.iter().rev().find_map(|chunk| {
            let at = chunk.binary_search_by_key(&op, |run| run.op_id).ok()?;
            Some(chunk[at])
        })
    }

    /// The held run with the greatest op id below `op`.
    fn run_before(&self, op: u64) -> Option<OpRun> {
        let before = self.runs.iter().filter_map(|chunk| {
            let at = chunk.partition_point(|run| run.op_id < op);
            at.checked_sub(1).map(|at| chunk[at])
        });
        before.max_by_key(|run| run.op_id)
    }

    /// The op id of op `index` of `iteration`, if its run is held.
    fn id_of(&self, iteration: u64, index: usize) -> Option<u64> {
        let key = (iteration, index as u32);
        self.runs.iter().rev().find_map(|chunk| {
            let at = chunk
                .binary_search_by_key(&key, |run| (run.iteration, run.index))
                .ok()?;
            Some(chunk[at].op_id)
        })
    }

    /// The id of `iteration`'s marker: the `iteration_end` op after its last op held and
    /// before the next iteration's first.
    fn marker_id(
        &self,
        edges: &ShapeEdges,
        iteration: u64,
        markers: &impl Fn(u64, u64) -> Option<u64>,
    ) -> Option<u64> {
        let ops = edges.shape.ops.len();
        let after = (0..ops)
            .rev()
            .find_map(|index| self.id_of(iteration, index))?;
        let before = (0..ops)
            .find_map(|index| self.id_of(iteration + 1, index))
            .unwrap_or(u64::MAX);
        markers(after, before)
    }
}

fn var_name(shape: &GraphShape, var: u32) -> String {
    shape
        .vars
        .get(var as usize)
        .cloned()
        .unwrap_or_else(|| format!("var {var}"))
}

fn sorted(runs: &[OpRun]) -> Chunk {
    let mut runs = runs.to_vec();
    runs.sort_unstable_by_key(|run| run.op_id);
    runs.into()
}

#[derive(Debug, Default)]
struct LogInner {
    edges: Option<Edges>,
    sealed: VecDeque<Chunk>,
    tail: Vec<OpRun>,
}

/// The bounded log of a run's op runs and its shape (see the module docs): the run's graph
/// observer live, fed from a recording in a replay.
pub(crate) struct RunLog {
    capacity: usize,
    inner: Mutex<LogInner>,
    /// Told everything the log is told (a recorder's observer).
    // std's `Arc`: a trait object, which loom's `Arc` cannot coerce to `dyn`.
    forward: Option<std::sync::Arc<dyn GraphObserver>>,
}

impl fmt::Debug for RunLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunLog")
            .field("capacity", &self.capacity)
            .field("forward", &self.forward.is_some())
            .finish()
    }
}

impl RunLog {
    /// A log keeping at least `capacity` op runs (whole chunks, at least two), telling
    /// `forward` too.
    pub(crate) fn new(
        capacity: usize,
        // std's Arc: a `dyn` trait object, which loom's `Arc` cannot hold.
        forward: Option<std::sync::Arc<dyn GraphObserver>>,
    ) -> RunLog {
        RunLog {
            capacity: capacity.div_ceil(CHUNK).max(2) * CHUNK,
            inner: Mutex::new(LogInner::default()),
            forward,
        }
    }

    /// The graph as it stands: the shape's edges and the runs held.
    pub(crate) fn snapshot(&self) -> OpGraph {
        let inner = self.inner.lock();
        let mut runs: Vec<Chunk> = inner.sealed.iter().cloned().collect();
        if !inner.tail.is_empty() {
            runs.push(sorted(&inner.tail));
        }
        OpGraph {
            edges: inner.edges.clone(),
            runs,
        }
    }

    /// Lets every op run go (the shape stays): a replay going back refills it.
    pub(crate) fn clear_runs(&self) {
        let mut inner = self.inner.lock();
        inner.sealed.clear();
        inner.tail.clear();
    }

    /// Takes `runs`, in one lock.
    pub(crate) fn add_runs(&self, runs: impl IntoIterator<Item = OpRun>) {
        let mut inner = self.inner.lock();
        for run in runs {
            inner.tail.push(run);
            if inner.tail.len() >= CHUNK {
                let full = std::mem::take(&mut inner.tail);
                inner.sealed.push_back(sorted(&full));
                while (inner.sealed.len() + 1) * CHUNK > self.capacity {
                    inner.sealed.pop_front();
                }
            }
        }
    }

    /// Takes `shape` (once a run starts).
    pub(crate) fn set_shape(&self, shape: &GraphShape) {
        let edges = Edges::new(ShapeEdges::new(shape));
        self.inner.lock().edges = Some(edges);
    }
}

impl GraphObserver for RunLog {
    fn shape(&self, shape: &GraphShape) {
        self.set_shape(shape);
        if let Some(forward) = &self.forward {
            forward.shape(shape);
        }
    }

    fn ran(&self, run: OpRun) {
        self.add_runs([run]);
        if let Some(forward) = &self.forward {
            forward.ran(run);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::record::graph::GraphOp;

    /// [`OpGraph::new`] on a two-op graph: the second op waits on the first.
    #[test]
    fn a_graph_names_reads_writes_and_the_op_waited_on() {
        let op = GraphOp::on_first_pool;
        let shape = GraphShape {
            vars: vec!["x".into(), "y".into()],
            ops: vec![op("load", &[], &[0]), op("use", &[0], &[1])],
            ..GraphShape::default()
        };
        let run = |op_id, index| OpRun {
            op_id,
            iteration: 0,
            index,
        };
        let graph = OpGraph::new(&shape, vec![run(7, 0), run(8, 1)]);
        let deps = graph.deps_of(8, "use", |_, _| None).unwrap();
        assert_eq!(
            (deps.reads, deps.writes),
            (vec!["x".into()], vec!["y".into()])
        );
        assert_eq!(deps.waited_on[0].to_string(), "op 7 load (RAW on x)");
    }

    /// Vars `w`, `x`, `y`: `load` writes x; `conv` reads w and x, writes y; `reuse` reads y
    /// and overwrites x (after `conv` read it); `blind` writes y without reading it.
    fn shape() -> GraphShape {
        let op = GraphOp::on_first_pool;
        GraphShape {
            vars: vec!["w".into(), "x".into(), "y".into()],
            ops: vec![
                op("load", &[], &[1]),
                op("conv", &[0, 1], &[2]),
                op("reuse", &[2], &[1]),
                op("blind", &[], &[2]),
            ],
            ..GraphShape::default()
        }
    }

    /// Op ids as the engine would give them: 10 per iteration, op `i` at `10k + i`, the
    /// marker at `10k + 4` (5 to 9: other pushes).
    fn runs(iterations: u64) -> Vec<OpRun> {
        let mut runs = Vec::new();
        for iteration in 0..iterations {
            for index in 0..4 {
                runs.push(OpRun {
                    op_id: 100 + 10 * iteration + u64::from(index),
                    iteration,
                    index,
                });
            }
        }
        runs
    }

    fn markers(after: u64, before: u64) -> Option<u64> {
        (after..before).find(|op| op % 10 == 4)
    }

    fn waited(deps: &OpDeps) -> Vec<String> {
        deps.waited_on.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn the_first_iteration_waits_on_its_own_ops_by_the_engines_rules() {
        let graph = OpGraph::new(&shape(), runs(3));
        let deps = |op: u64, name: &str| graph.deps_of(op, name, markers).unwrap();
        let load = deps(100, "load");
        assert_eq!(load.writes, ["x"]);
        assert!(load.waited_on.is_empty(), "{:?}", waited(&load));
        let conv = deps(101, "conv");
        assert_eq!(waited(&conv), ["op 100 load (RAW on x)"]);
        assert_eq!(
            (conv.reads, conv.writes),
            (vec!["w".into(), "x".into()], vec!["y".into()])
        );
        // reuse reads what conv wrote and overwrites x, which load wrote and conv read since.
        assert_eq!(
            waited(&deps(102, "reuse")),
            [
                "op 101 conv (RAW on y)",
                "op 100 load (WAW on x)",
                "op 101 conv (WAR on x)"
            ]
        );
        // blind overwrites y without reading it: conv wrote it, reuse read it since.
        assert_eq!(
            waited(&deps(103, "blind")),
            ["op 101 conv (WAW on y)", "op 102 reuse (WAR on y)"]
        );
    }

    #[test]
    fn a_later_iteration_waits_on_the_one_before_and_its_marker() {
        let graph = OpGraph::new(&shape(), runs(3));
        let deps = |op: u64, name: &str| graph.deps_of(op, name, markers).unwrap();
        // load of iteration 1 overwrites x: reuse wrote it last, the marker of iteration 0
        // (op 104) read it since.
        assert_eq!(
            waited(&deps(110, "load")),
            ["op 102 reuse (WAW on x)", "op 104 iteration_end (WAR on x)"]
        );
        // conv of iteration 1 reads w (no iteration op writes it: the setup's write is
        // done) and x, and overwrites y, which blind wrote and the marker read.
        assert_eq!(
            waited(&deps(111, "conv")),
            [
                "op 110 load (RAW on x)",
                "op 103 blind (WAW on y)",
                "op 104 iteration_end (WAR on y)"
            ]
        );
        let blind = deps(113, "blind");
        assert_eq!(
            waited(&blind),
            ["op 111 conv (WAW on y)", "op 112 reuse (WAR on y)"]
        );
        // The marker of iteration 1 reads every var: the last writers of x and y.
        let marker = deps(114, ITERATION_END);
        assert_eq!(marker.reads, ["w", "x", "y"]);
        assert_eq!(
            waited(&marker),
            ["op 112 reuse (RAW on x)", "op 113 blind (RAW on y)"]
        );
    }

    /// Past its capacity the log lets the oldest runs go: their ops are no longer placed,
    /// and an op waiting on one names it by its iteration instead of its id.
    #[test]
    fn the_log_keeps_its_newest_runs_and_forwards_what_it_is_told() {
        let told = std::sync::Arc::new(RunLog::new(CHUNK, None));
        let log = RunLog::new(2 * CHUNK, Some(told.clone()));
        log.shape(&shape());
        let all = runs(CHUNK as u64); // 4 chunks' worth
        for run in &all {
            log.ran(*run);
        }
        let graph = log.snapshot();
        let held: usize = graph.runs.iter().map(|chunk| chunk.len()).sum();
        assert!((CHUNK..=2 * CHUNK).contains(&held), "{held}");
        let newest = all.last().unwrap();
        let deps = graph.deps_of(newest.op_id, "blind", markers).unwrap();
        assert_eq!(deps.writes, ["y"]);
        assert_eq!(graph.deps_of(100, "load", markers), None, "let go");
        let oldest = graph
            .runs
            .iter()
            .flat_map(|c| c.iter())
            .min_by_key(|r| r.op_id);
        let oldest = oldest.unwrap();
        assert_eq!(oldest.index, 0, "whole chunks go");
        let first = graph.deps_of(oldest.op_id, "load", markers).unwrap();
        let before = oldest.iteration - 1;
        assert_eq!(
            waited(&first)[0],
            format!("reuse of iteration {before} (WAW on x)")
        );
        // The forwarded log was told the same.
        let forwarded = told.snapshot();
        assert!(forwarded.edges.is_some());
        assert!(forwarded.deps_of(newest.op_id, "blind", markers).is_some());
    }
}
