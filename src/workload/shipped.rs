//! The workloads compiled into the binary (so `--workload NAME` works from any directory),
//! and the one-line-each catalog `enginetop workloads` prints.
#![forbid(unsafe_code)]

use std::fmt::Write;

use super::device::ContextText;
use super::expr::Value;
use super::graph::Graph;
use super::load::load_str;
use super::params::Overrides;
use crate::engine::Context;
use crate::kernels::KernelKind;

/// A workload file shipped in `workloads/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShippedWorkload {
    /// Its name (the file stem).
    pub name: &'static str,
    /// The file's text.
    pub source: &'static str,
}

macro_rules! shipped {
    ($($name:literal),+ $(,)?) => {
        /// Every shipped workload, in catalog order.
        pub const SHIPPED: &[ShippedWorkload] = &[$(ShippedWorkload {
            name: $name,
            source: include_str!(concat!("../../workloads/", $name, ".toml")),
        },)+];
    };
}

shipped![
    "resnet-like",
    "transformer-like",
    "pipeline",
    "wavefront",
    "chain",
    "tree",
    "random-dag",
    "embarrassing",
];

/// The shipped workload called `name`.
pub(super) fn find(name: &str) -> Option<&'static ShippedWorkload> {
    SHIPPED.iter().find(|workload| workload.name == name)
}

/// The most edits (insertions, deletions, substitutions, swaps of neighbours) between a
/// mistyped name and the shipped name [`closest`] offers.
const MAX_EDITS: usize = 3;

/// What the user probably meant by `name`: the shipped name that starts with it (three
/// characters or more), else the one closest by edit distance (Damerau-Levenshtein) if it is
/// at most `MAX_EDITS` away.
///
/// ```
/// use enginetop::workload::closest_shipped;
///
/// assert_eq!(closest_shipped("resnet-lke"), Some("resnet-like"));
/// assert_eq!(closest_shipped("transformer"), Some("transformer-like"));
/// assert_eq!(closest_shipped("my-model.tml"), None);
/// ```
pub fn closest_shipped(name: &str) -> Option<&'static str> {
    let names = || SHIPPED.iter().map(|workload| workload.name);
    if name.len() >= 3 {
        if let Some(longer) = names().find(|shipped| shipped.starts_with(name)) {
            return Some(longer);
        }
    }
    names()
        .map(|shipped| (shipped, strsim::damerau_levenshtein(name, shipped)))
        .filter(|&(_, edits)| edits <= MAX_EDITS)
        .min_by_key(|&(_, edits)| edits)
        .map(|(shipped, _)| shipped)
}

/// The shipped names, comma-separated.
pub(super) fn names() -> String {
    super::error::comma_list(SHIPPED.iter().map(|workload| workload.name))
}

/// `enginetop workloads`: a header, then per workload its name, ops per iteration, estimated
/// GFLOP per iteration and description.
pub fn catalog() -> String {
    let mut out = format!(
        "{:<18} {:>7} {:>8}  {}\n",
        "NAME", "OPS", "GFLOP", "DESCRIPTION"
    );
    for workload in SHIPPED {
        let _ = match load_str(workload.source, workload.name, &Overrides::default()) {
            Ok(graph) => writeln!(
                out,
                "{:<18} {:>7} {:>8.3}  {}",
                workload.name,
                graph.iteration_ops().len(),
                graph.iteration_flops() as f64 / 1e9,
                graph.description
            ),
            Err(err) => writeln!(out, "{:<18} {:>7} {:>8}  {err}", workload.name, "-", "-"),
        };
    }
    out
}

/// `enginetop workloads NAME`: what a loaded workload holds, in a few lines.
pub fn summary(graph: &Graph) -> String {
    let mut out = format!("{}: {}\n", graph.name, graph.description);
    let params: Vec<String> = graph
        .params
        .iter()
        .map(|(name, value)| match value {
            Value::Text(text) => format!("{name} = {text:?}"),
            other => format!("{name} = {other}"),
        })
        .collect();
    let _ = writeln!(
        out,
        "params: {}",
        if params.is_empty() {
            "none".to_string()
        } else {
            params.join(", ")
        }
    );
    let _ = writeln!(
        out,
        "tensors: {} ({:.1} MiB)",
        graph.tensors.len(),
        graph.tensor_bytes() as f64 / (1u64 << 20) as f64
    );
    let _ = writeln!(
        out,
        "ops: {} setup, {} per iteration ({})",
        graph.setup.len(),
        graph.iteration.len(),
        kernel_counts(graph)
    );
    let _ = writeln!(
        out,
        "GFLOP per iteration: {:.3}",
        graph.iteration_flops() as f64 / 1e9
    );
    let mut devices: Vec<Context> = graph.ops.iter().map(|op| op.device).collect();
    devices.extend(graph.tensors.iter().map(|tensor| tensor.device));
    devices.sort_unstable();
    devices.dedup();
    let _ = writeln!(
        out,
        "devices: {}",
        super::error::comma_list(devices.into_iter().map(ContextText))
    );
    out
}

/// `conv2d 53, relu 49, ...`, most frequent first.
fn kernel_counts(graph: &Graph) -> String {
    let mut counts: Vec<(usize, KernelKind)> = KernelKind::ALL
        .iter()
        .map(|kind| {
            (
                graph.ops.iter().filter(|op| op.kernel == *kind).count(),
                *kind,
            )
        })
        .filter(|(count, _)| *count > 0)
        .collect();
    counts.sort_by_key(|(count, _)| std::cmp::Reverse(*count));
    super::error::comma_list(counts.iter().map(|(count, kind)| format!("{kind} {count}")))
}
