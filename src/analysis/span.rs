//! Work, span and the critical path of one iteration's graph (the rules are in the
//! [module docs](super)).
#![forbid(unsafe_code)]

use std::time::Duration;

use crate::device::identity::Lane;

/// How many critical-path ops a [`Scaling`] keeps (the longest first).
const PATH_KEPT: usize = 10;

/// One op that ran: what it touched and how long it took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RanOp {
    /// Its name (shown on the critical path).
    pub name: String,
    /// Index of its device (its worker pool) in [`RanGraph::devices`].
    pub device: usize,
    /// Vars it reads, read-modify-write ones included (indices into [`RanGraph::vars`]).
    pub reads: Vec<usize>,
    /// Vars it writes.
    pub writes: Vec<usize>,
    /// Its wall time on its worker.
    pub time: Duration,
}

/// One iteration's ops in push order, the names of their vars and devices, and the wall
/// time the iteration took.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RanGraph {
    /// The ops, in the order they were pushed.
    pub ops: Vec<RanOp>,
    /// Var names, by index.
    pub vars: Vec<String>,
    /// Devices (the worker pools ops run on), by index.
    pub devices: Vec<Lane>,
    /// The iteration's wall time (its step).
    pub wall: Duration,
}

/// Why an op waits for another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EdgeKind {
    /// It reads what the other wrote (a true dependency).
    ReadAfterWrite,
    /// It overwrites what the other read (a reused var).
    WriteAfterRead,
    /// It overwrites, without reading, what the other wrote (a reused var).
    WriteAfterWrite,
}

impl EdgeKind {
    /// Whether the edge comes from reusing a var rather than from the data.
    pub fn is_false(self) -> bool {
        self != EdgeKind::ReadAfterWrite
    }

    /// `write-after-read`.
    pub fn label(self) -> &'static str {
        match self {
            EdgeKind::ReadAfterWrite => "read-after-write",
            EdgeKind::WriteAfterRead => "write-after-read",
            EdgeKind::WriteAfterWrite => "write-after-write",
        }
    }
}

/// An edge of the critical path: its kind and the var behind it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Edge {
    /// Why the later op waits.
    pub kind: EdgeKind,
    /// The var both ops touch.
    pub var: String,
}

/// An op on the critical path.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PathOp {
    /// Its name.
    pub name: String,
    /// Its time over the span.
    pub share: f64,
    /// Its time, in milliseconds.
    pub ms: f64,
}

/// One device's (worker pool's) part of the graph.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct DeviceScaling {
    /// The worker pool (`cpu0 workers` in JSON).
    #[serde(serialize_with = "super::display")]
    pub device: Lane,
    /// Its ops.
    pub ops: usize,
    /// Its ops' total time, in milliseconds.
    pub work_ms: f64,
    /// The longest chain counting only its ops' times, in milliseconds.
    pub span_ms: f64,
    /// `work / span`.
    pub parallelism: f64,
    /// `work / wall`: its workers busy on average.
    pub achieved_parallelism: f64,
}

/// Work, span and critical path of one iteration.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Scaling {
    /// Ops in the iteration.
    pub ops: usize,
    /// The iteration's wall time, in milliseconds.
    pub wall_ms: f64,
    /// Total op time, in milliseconds.
    pub work_ms: f64,
    /// The longest dependency chain weighted by op times, in milliseconds.
    pub span_ms: f64,
    /// `work / span`: the most workers the graph can keep busy.
    pub parallelism: f64,
    /// `work / wall`: the workers it kept busy on average.
    pub achieved_parallelism: f64,
    /// Ops on the critical path.
    pub critical_path_ops: usize,
    /// The longest ops of the critical path (at most ten), longest first.
    pub critical_path: Vec<PathOp>,
    /// The false edges (write-after-read, write-after-write) on the critical path, one per
    /// var, in path order.
    pub false_edges: Vec<Edge>,
    /// Per device.
    pub devices: Vec<DeviceScaling>,
}

/// The edge into an op from one of its predecessors: the engine's own rule (a read waits
/// for the var's last writer, a write for its readers since then and, without them, for its
/// last writer), which the op detail shows as what an op waited on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pred {
    /// The predecessor, as an index into [`RanGraph::ops`].
    pub(crate) op: usize,
    /// Why the op waits for it.
    pub(crate) kind: EdgeKind,
    /// The var both touch (an index into [`RanGraph::vars`]).
    pub(crate) var: usize,
}

/// The longest path through the graph under some weights.
struct Longest {
    /// In nanoseconds.
    span: u64,
    /// The ops of the path, first to last, each with the edge into it (none for the first).
    path: Vec<(usize, Option<Pred>)>,
}

/// Work, span, parallelism and the critical path of `graph`.
///
/// ```
/// use std::time::Duration;
/// use enginetop::analysis::{analyze, RanGraph, RanOp};
/// use enginetop::device::identity::Lane;
///
/// let ms = Duration::from_millis;
/// let op = |name: &str, reads: Vec<usize>, writes: Vec<usize>| RanOp {
///     name: name.into(), device: 0, reads, writes, time: ms(10),
/// };
/// let graph = RanGraph {
///     ops: vec![op("a", vec![], vec![0]), op("b", vec![0], vec![1]), op("c", vec![], vec![2])],
///     vars: vec!["x".into(), "y".into(), "z".into()],
///     devices: vec![Lane::CpuWorkers(0)],
///     wall: ms(20),
/// };
/// let scaling = analyze(&graph);
/// assert_eq!((scaling.work_ms, scaling.span_ms), (30.0, 20.0));
/// assert_eq!(scaling.critical_path_ops, 2);
/// ```
pub fn analyze(graph: &RanGraph) -> Scaling {
    let times: Vec<Duration> = graph.ops.iter().map(|op| op.time).collect();
    analyze_times(graph, &predecessors(graph), &times, graph.wall)
}

/// [`analyze`] of `graph`'s shape with `times` (one per op, in place of the ops' own) over a
/// step of `wall`, its `preds` ([`predecessors`]) computed once for a shape whose times
/// change: a live run judges a new iteration of the same graph each time.
pub(crate) fn analyze_times(
    graph: &RanGraph,
    preds: &[Vec<Pred>],
    times: &[Duration],
    wall: Duration,
) -> Scaling {
    let weights: Vec<u64> = times.iter().map(|&time| nanos(time)).collect();
    let longest = longest_path(preds, &weights);
    let work = Duration::from_nanos(weights.iter().sum());
    let span = Duration::from_nanos(longest.span);
    let critical_path_ops = longest.path.len();
    Scaling {
        ops: graph.ops.len(),
        wall_ms: ms(wall),
        work_ms: ms(work),
        span_ms: ms(span),
        parallelism: ratio(work, span),
        achieved_parallelism: ratio(work, wall),
        critical_path_ops,
        critical_path: path_ops(graph, &longest, times, span),
        false_edges: false_edges(graph, &longest),
        devices: (0..graph.devices.len())
            .map(|device| device_scaling(graph, preds, (&weights, &longest), wall, device))
            .collect(),
    }
}

/// The [`PATH_KEPT`] longest ops of the path, longest first (ties in path order): only
/// those are named.
fn path_ops(
    graph: &RanGraph,
    longest: &Longest,
    times: &[Duration],
    span: Duration,
) -> Vec<PathOp> {
    let mut kept: Vec<(f64, usize)> = longest
        .path
        .iter()
        .map(|&(op, _)| (ratio(times[op], span), op))
        .collect();
    kept.sort_by(|a, b| b.0.total_cmp(&a.0));
    kept.truncate(PATH_KEPT);
    kept.into_iter()
        .map(|(share, op)| PathOp {
            name: graph.ops[op].name.clone(),
            share,
            ms: ms(times[op]),
        })
        .collect()
}

/// Each op's predecessors, from every var's accesses in push order.
pub(crate) fn predecessors(graph: &RanGraph) -> Vec<Vec<Pred>> {
    let mut last_writer: Vec<Option<usize>> = vec![None; graph.vars.len()];
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); graph.vars.len()];
    let mut preds = Vec::with_capacity(graph.ops.len());
    for (index, op) in graph.ops.iter().enumerate() {
        let mut into = Vec::new();
        for &var in &op.reads {
            if let Some(writer) = last_writer[var] {
                into.push(Pred {
                    op: writer,
                    kind: EdgeKind::ReadAfterWrite,
                    var,
                });
            }
        }
        for &var in &op.writes {
            if let (false, Some(writer)) = (op.reads.contains(&var), last_writer[var]) {
                into.push(Pred {
                    op: writer,
                    kind: EdgeKind::WriteAfterWrite,
                    var,
                });
            }
            let earlier = readers[var].iter().filter(|&&reader| reader != index);
            into.extend(earlier.map(|&reader| Pred {
                op: reader,
                kind: EdgeKind::WriteAfterRead,
                var,
            }));
        }
        for &var in &op.reads {
            if !op.writes.contains(&var) && readers[var].last() != Some(&index) {
                readers[var].push(index);
            }
        }
        for &var in &op.writes {
            last_writer[var] = Some(index);
            readers[var].clear();
        }
        preds.push(into);
    }
    preds
}

/// The longest path with op `i` weighing `weights[i]` nanoseconds (push order is
/// topological).
fn longest_path(preds: &[Vec<Pred>], weights: &[u64]) -> Longest {
    let mut finish: Vec<u64> = Vec::with_capacity(weights.len());
    let mut best: Vec<Option<Pred>> = Vec::with_capacity(weights.len());
    for (index, into) in preds.iter().enumerate() {
        let before = into.iter().max_by_key(|pred| finish[pred.op]).copied();
        finish.push(weights[index] + before.map_or(0, |pred| finish[pred.op]));
        best.push(before);
    }
    let Some((end, &span)) = finish.iter().enumerate().max_by_key(|(_, time)| **time) else {
        return Longest {
            span: 0,
            path: Vec::new(),
        };
    };
    let mut path = vec![(end, best[end])];
    while let Some(pred) = path.last().and_then(|(_, into)| *into) {
        path.push((pred.op, best[pred.op]));
    }
    path.reverse();
    Longest { span, path }
}

/// The length of the longest path with op `i` weighing `weights[i]` (the path itself not
/// kept).
fn longest_span(preds: &[Vec<Pred>], weights: &[u64]) -> u64 {
    let mut finish: Vec<u64> = Vec::with_capacity(weights.len());
    for (index, into) in preds.iter().enumerate() {
        let before = into.iter().map(|pred| finish[pred.op]).max().unwrap_or(0);
        finish.push(weights[index] + before);
    }
    finish.into_iter().max().unwrap_or(0)
}

/// The false edges on the path, one per var (by name), in path order.
fn false_edges(graph: &RanGraph, longest: &Longest) -> Vec<Edge> {
    let mut edges: Vec<Edge> = Vec::new();
    let mut seen = vec![false; graph.vars.len()];
    for pred in longest.path.iter().filter_map(|(_, into)| *into) {
        if !pred.kind.is_false() || std::mem::replace(&mut seen[pred.var], true) {
            continue; // a var seen before: its name is among the edges already
        }
        let var = &graph.vars[pred.var];
        if !edges.iter().any(|edge| &edge.var == var) {
            edges.push(Edge {
                kind: pred.kind,
                var: var.clone(),
            });
        }
    }
    edges
}

/// `device`'s work and span under `weights` (ns) over `wall` (other devices' ops weigh
/// nothing); a device running every op has the whole graph's span, `longest`'s.
fn device_scaling(
    graph: &RanGraph,
    preds: &[Vec<Pred>],
    (weights, longest): (&[u64], &Longest),
    wall: Duration,
    device: usize,
) -> DeviceScaling {
    let on_device = |op: &RanOp| op.device == device;
    let ops = graph.ops.iter().filter(|op| on_device(op)).count();
    let (work, span) = if ops == graph.ops.len() {
        (weights.iter().sum(), longest.span)
    } else {
        let own: Vec<u64> = graph
            .ops
            .iter()
            .zip(weights)
            .map(|(op, &weight)| if on_device(op) { weight } else { 0 })
            .collect();
        (own.iter().sum(), longest_span(preds, &own))
    };
    let (work, span) = (Duration::from_nanos(work), Duration::from_nanos(span));
    DeviceScaling {
        device: graph.devices[device],
        ops,
        work_ms: ms(work),
        span_ms: ms(span),
        parallelism: ratio(work, span),
        achieved_parallelism: ratio(work, wall),
    }
}

/// `time` in whole nanoseconds (saturating: no op time comes near).
fn nanos(time: Duration) -> u64 {
    u64::try_from(time.as_nanos()).unwrap_or(u64::MAX)
}

fn ms(time: Duration) -> f64 {
    time.as_secs_f64() * 1e3
}

/// `a / b`, 0 when `b` is zero.
fn ratio(a: Duration, b: Duration) -> f64 {
    if b.is_zero() {
        0.0
    } else {
        a.as_secs_f64() / b.as_secs_f64()
    }
}

#[cfg(all(test, not(loom)))]
pub(crate) mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// An op on device 0 (the verdict tests build their graphs with it too).
    pub(crate) fn op(name: &str, reads: &[usize], writes: &[usize], time: Duration) -> RanOp {
        RanOp {
            name: name.to_string(),
            device: 0,
            reads: reads.to_vec(),
            writes: writes.to_vec(),
            time,
        }
    }

    fn graph(ops: Vec<RanOp>, vars: usize, wall: Duration) -> RanGraph {
        RanGraph {
            ops,
            vars: (0..vars).map(|var| format!("v{var}")).collect(),
            devices: vec![Lane::CpuWorkers(0)],
            wall,
        }
    }

    #[test]
    fn a_chain_has_its_whole_work_as_span() {
        // Each op reads and writes x: read-after-write all the way.
        let ops = (0..20)
            .map(|i| op(&format!("s{i}"), &[0], &[0], MS))
            .collect();
        let scaling = analyze(&graph(ops, 1, 20 * MS));
        assert_eq!(scaling.work_ms, scaling.span_ms);
        assert_eq!(scaling.parallelism, 1.0);
        assert_eq!(scaling.critical_path_ops, 20);
        assert!(scaling.false_edges.is_empty());
        assert_eq!(scaling.achieved_parallelism, 1.0);
    }

    #[test]
    fn independent_ops_have_a_parallelism_of_their_count() {
        let ops = (0..16)
            .map(|i| op(&format!("t{i}"), &[], &[i], MS))
            .collect();
        let scaling = analyze(&graph(ops, 16, 8 * MS));
        assert_eq!((scaling.work_ms, scaling.span_ms), (16.0, 1.0));
        assert_eq!(scaling.parallelism, 16.0);
        assert_eq!(scaling.achieved_parallelism, 2.0);
        assert_eq!(scaling.critical_path_ops, 1);
    }

    #[test]
    fn a_binary_tree_has_a_span_of_its_depth() {
        // 32 leaves each write their var; each inner node reads two children, writes its own.
        let leaves = 32;
        let mut ops: Vec<RanOp> = (0..leaves)
            .map(|i| op(&format!("leaf{i}"), &[], &[i], MS))
            .collect();
        let (mut level, mut next_var) = ((0..leaves).collect::<Vec<_>>(), leaves);
        while level.len() > 1 {
            let mut up = Vec::new();
            for pair in level.chunks(2) {
                ops.push(op(&format!("n{next_var}"), pair, &[next_var], MS));
                up.push(next_var);
                next_var += 1;
            }
            level = up;
        }
        let scaling = analyze(&graph(ops, next_var, 10 * MS));
        assert_eq!(scaling.work_ms, 63.0);
        assert_eq!(scaling.span_ms, 6.0, "log2(32) + 1 levels");
        assert_eq!(scaling.critical_path_ops, 6);
        assert!(scaling.false_edges.is_empty());
    }

    #[test]
    fn write_after_read_edges_count_and_are_named() {
        // Two buffer slots: fill{b} writes slot b%2, use{b} reads it and writes out{b}.
        // fill2 must wait for use0 (write-after-read on slot 0).
        let mut ops = Vec::new();
        for b in 0..6 {
            ops.push(op(&format!("fill{b}"), &[], &[b % 2], 4 * MS));
            ops.push(op(&format!("use{b}"), &[b % 2], &[2 + b], MS));
        }
        let scaling = analyze(&graph(ops, 8, 20 * MS));
        assert_eq!(scaling.work_ms, 30.0);
        assert_eq!(scaling.span_ms, 15.0, "three fill+use pairs on one slot");
        let vars: Vec<(&str, EdgeKind)> = scaling
            .false_edges
            .iter()
            .map(|edge| (edge.var.as_str(), edge.kind))
            .collect();
        assert_eq!(vars.len(), 1);
        assert_eq!(vars[0].1, EdgeKind::WriteAfterRead);
        assert!(vars[0].0 == "v0" || vars[0].0 == "v1", "{vars:?}");
        assert!(scaling.critical_path[0].name.starts_with("fill"));
        assert_eq!(scaling.critical_path[0].share, 4.0 / 15.0);
    }

    #[test]
    fn blind_overwrites_are_write_after_write_edges() {
        let ops = vec![op("a", &[], &[0], 3 * MS), op("b", &[], &[0], 2 * MS)];
        let scaling = analyze(&graph(ops, 1, 5 * MS));
        assert_eq!(scaling.span_ms, 5.0);
        assert_eq!(scaling.false_edges[0].kind, EdgeKind::WriteAfterWrite);
    }

    #[test]
    fn a_device_span_counts_only_its_own_ops() {
        let mut ops = vec![
            op("gpu_long", &[], &[0], 10 * MS),
            op("cpu_a", &[0], &[1], MS),
            op("cpu_b", &[], &[2], MS),
        ];
        ops[0].device = 1;
        let mut graph = graph(ops, 3, 12 * MS);
        graph.devices.push(Lane::Gpu(0));
        let scaling = analyze(&graph);
        assert_eq!(scaling.span_ms, 11.0);
        let cpu = &scaling.devices[0];
        assert_eq!((cpu.ops, cpu.work_ms, cpu.span_ms), (2, 2.0, 1.0));
        assert_eq!(scaling.devices[1].span_ms, 10.0);
    }

    /// The analysis of a shape with times given apart (as a live run judges each
    /// iteration) equals the analysis of the same graph carrying those times.
    #[test]
    fn analyzing_a_shape_with_times_equals_analyzing_the_timed_graph() {
        let mut ops = Vec::new();
        for b in 0..8usize {
            let time = MS * (1 + (b as u32 * 7) % 5);
            ops.push(op(&format!("fill{b}"), &[], &[b % 3], time));
            ops.push(op(&format!("use{b}"), &[b % 3, 3], &[4 + b], 2 * time));
        }
        ops[3].device = 1;
        ops[8].device = 1;
        let mut timed = graph(ops, 12, 40 * MS);
        timed.devices.push(Lane::Gpu(0));
        let mut shape = timed.clone();
        for op in &mut shape.ops {
            op.time = Duration::ZERO;
        }
        shape.wall = Duration::ZERO;
        let times: Vec<Duration> = timed.ops.iter().map(|op| op.time).collect();
        let preds = predecessors(&shape);
        let apart = analyze_times(&shape, &preds, &times, timed.wall);
        assert_eq!(apart, analyze(&timed));
        assert!(apart.span_ms > 0.0 && apart.devices[1].work_ms > 0.0);
    }

    /// The analysis as the module docs state it, in `Duration`s with every path op named
    /// before the ten longest are kept and a pass per device: the reference the fast form
    /// must equal.
    fn reference(graph: &RanGraph) -> Scaling {
        let preds = predecessors(graph);
        let longest = |weights: &[Duration]| {
            let mut finish: Vec<Duration> = Vec::new();
            let mut best: Vec<Option<Pred>> = Vec::new();
            for (index, into) in preds.iter().enumerate() {
                let before = into.iter().max_by_key(|pred| finish[pred.op]).copied();
                finish.push(weights[index] + before.map_or(Duration::ZERO, |p| finish[p.op]));
                best.push(before);
            }
            let Some((end, &span)) = finish.iter().enumerate().max_by_key(|(_, t)| **t) else {
                return (Duration::ZERO, Vec::new());
            };
            let mut path = vec![(end, best[end])];
            while let Some(pred) = path.last().and_then(|(_, into)| *into) {
                path.push((pred.op, best[pred.op]));
            }
            path.reverse();
            (span, path)
        };
        let times: Vec<Duration> = graph.ops.iter().map(|op| op.time).collect();
        let (span, path) = longest(&times);
        let work: Duration = times.iter().sum();
        let mut critical_path: Vec<PathOp> = path
            .iter()
            .map(|&(op, _)| PathOp {
                name: graph.ops[op].name.clone(),
                share: ratio(times[op], span),
                ms: ms(times[op]),
            })
            .collect();
        critical_path.sort_by(|a, b| b.share.total_cmp(&a.share));
        critical_path.truncate(PATH_KEPT);
        let mut false_edges: Vec<Edge> = Vec::new();
        for pred in path.iter().filter_map(|(_, into)| *into) {
            let var = &graph.vars[pred.var];
            if pred.kind.is_false() && !false_edges.iter().any(|edge| &edge.var == var) {
                false_edges.push(Edge {
                    kind: pred.kind,
                    var: var.clone(),
                });
            }
        }
        let devices = (0..graph.devices.len()).map(|device| {
            let on = |op: &RanOp| op.device == device;
            let weights: Vec<Duration> = (graph.ops.iter().zip(&times))
                .map(|(op, time)| if on(op) { *time } else { Duration::ZERO })
                .collect();
            let work: Duration = weights.iter().sum();
            let span = longest(&weights).0;
            DeviceScaling {
                device: graph.devices[device],
                ops: graph.ops.iter().filter(|op| on(op)).count(),
                work_ms: ms(work),
                span_ms: ms(span),
                parallelism: ratio(work, span),
                achieved_parallelism: ratio(work, graph.wall),
            }
        });
        Scaling {
            ops: graph.ops.len(),
            wall_ms: ms(graph.wall),
            work_ms: ms(work),
            span_ms: ms(span),
            parallelism: ratio(work, span),
            achieved_parallelism: ratio(work, graph.wall),
            critical_path_ops: path.len(),
            critical_path,
            false_edges,
            devices: devices.collect(),
        }
    }

    /// The analysis equals its reference form on random graphs: one device or two,
    /// op times with many ties (equal shares on the path, equal finishing times) and
    /// nanosecond ones, paths longer than the ten ops kept, vars sharing a name.
    #[test]
    fn the_analysis_equals_its_reference_form_on_random_graphs() {
        for seed in 1..=12u64 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut next = move |bound: u64| rng.u64(..bound);
            let vars = 4 + next(20) as usize;
            let ops = (0..300)
                .map(|i| {
                    let reads: Vec<usize> =
                        (0..next(4)).map(|_| next(vars as u64) as usize).collect();
                    let writes = [next(vars as u64) as usize];
                    let time = match seed % 3 {
                        0 => MS * (1 + next(3) as u32),
                        1 => Duration::from_nanos(next(5_000)),
                        _ => Duration::new(next(3), next(1_000_000_000) as u32),
                    };
                    let mut ran = op(&format!("r{i}"), &reads, &writes, time);
                    ran.reads.sort_unstable();
                    ran.reads.dedup();
                    ran
                })
                .collect();
            let mut g = graph(ops, vars, 50 * MS);
            if seed % 4 == 1 {
                g.vars = (0..vars).map(|var| format!("v{}", var % 3)).collect();
            }
            if seed % 2 == 0 {
                g.devices.push(Lane::Gpu(0));
                for op in g.ops.iter_mut().step_by(3) {
                    op.device = 1;
                }
            }
            let fast = analyze(&g);
            assert!(fast.critical_path_ops > PATH_KEPT, "seed {seed}");
            assert_eq!(fast, reference(&g), "seed {seed}");
        }
    }

    #[test]
    fn an_empty_or_instant_graph_has_no_parallelism_rather_than_nan() {
        let scaling = analyze(&graph(Vec::new(), 0, Duration::ZERO));
        assert_eq!((scaling.parallelism, scaling.critical_path_ops), (0.0, 0));
        let ops = vec![op("a", &[], &[0], Duration::ZERO)];
        assert_eq!(analyze(&graph(ops, 1, MS)).parallelism, 0.0);
    }
}
