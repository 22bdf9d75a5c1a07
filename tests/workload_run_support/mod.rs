//! Shared by the `workload_run*` tests: every shipped workload's `--set` overrides for a run
//! of a few milliseconds.
#![allow(dead_code)] // each test file uses a different subset

use enginetop::workload::{load_spec, Graph, Overrides};

/// `--set` overrides that make the shipped workload `name` small; panics for a workload
/// without any, so a newly shipped workload gets sizes here before its tests pass.
pub fn small_overrides(name: &str) -> &'static [&'static str] {
    match name {
        "resnet-like" => &[
            "image=32",
            "width=4",
            "classes=10",
            "blocks1=2",
            "blocks2=1",
            "blocks3=1",
            "blocks4=1",
        ],
        "transformer-like" => &["seq=16", "dim=32", "heads=2", "layers=2", "vocab=50"],
        "pipeline" => &[
            "batches=4",
            "rows=16",
            "features=32",
            "hidden=32",
            "read_us=100",
        ],
        "wavefront" => &["n=12"],
        "chain" => &["length=200"],
        "tree" => &["nodes=255"],
        "random-dag" => &["ops=400"],
        "embarrassing" => &["ops=400", "width=64"],
        other => panic!("no small size for the shipped workload {other}: add one here"),
    }
}

/// The shipped workload `name` at its small size.
pub fn small(name: &str) -> Graph {
    let overrides = Overrides::from_args(small_overrides(name)).unwrap();
    load_spec(name, &overrides).unwrap()
}
