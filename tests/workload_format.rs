//! The format's features, each on a small file: file order, setup phase, templates and their
//! scope, generated lists, conditions, device and property inference, engine vars.
use enginetop::workload::{load_str, Context, FnProperty, Graph, Overrides, WorkloadError};

fn load(text: &str) -> Result<Graph, WorkloadError> {
    load_str(text, "t.toml", &Overrides::default())
}

fn names(graph: &Graph) -> Vec<&str> {
    graph.ops.iter().map(|op| op.name.as_str()).collect()
}

#[test]
fn ops_and_blocks_expand_in_file_order_and_setup_goes_first() {
    let graph = load(
        r#"
description = "order"
tensor = [{ name = "x", shape = [1] }]

[[op]]
name = "first"
kernel = "fold"
writes = ["x"]

[[block]]
repeat = 2
op = [{ name = "middle${i}", kernel = "fold", writes = ["x"] }]

[[op]]
name = "last"
kernel = "fold"
writes = ["x"]

[[block]]
phase = "setup"
op = [{ name = "init", kernel = "fold", writes = ["x"] }]
"#,
    )
    .unwrap();
    assert_eq!(
        names(&graph),
        ["init", "first", "middle0", "middle1", "last"]
    );
    assert_eq!((graph.setup.clone(), graph.iteration.clone()), (0..1, 1..5));
    assert_eq!(graph.setup_ops()[0].name, "init");
}

#[test]
fn templates_see_params_and_arguments_but_not_the_callers_index() {
    let template = r#"
description = "scope"
[params]
size = 3

[templates.t]
args = ["k"]
tensor = [{ name = "v${k}", shape = ["size"] }]
op = [{ name = "op${k}", kernel = "fold", writes = ["v${k}"] }]

[[block]]
repeat = 2
use = "t"
with = { k = "${i * 10}" }
"#;
    let graph = load(template).unwrap();
    assert_eq!(names(&graph), ["op0", "op10"]);
    assert_eq!(graph.tensors[1].shape, vec![3]);
    let leaky = template.replace("name = \"op${k}\"", "name = \"op${i}\"");
    let err = load(&leaky).unwrap_err().to_string();
    assert!(err.contains("unknown variable `i`"), "{err}");
}

#[test]
fn generated_lists_conditions_and_choices() {
    let graph = load(
        r#"
description = "lists"
[params]
n = 4
device = "cpu"

[[block]]
repeat = "n"
tensor = [{ name = "v${i}", shape = [1] }]

[[block]]
when = "is_gpu(device)"
op = [{ name = "never", kernel = "fold", writes = ["v0"] }]

[[op]]
name = "sum"
kernel = "sum_expr"
reads = [{ repeat = "n - 1", index = "k", name = "v${k + 1}" }, "v0"]
writes = ["${n > 2 ? 'v' + 0 : 'v1'}"]
"#,
    )
    .unwrap();
    assert_eq!(names(&graph), ["sum"]);
    let sum = &graph.ops[0];
    let read_names: Vec<&str> = sum
        .reads
        .iter()
        .map(|id| graph.tensor(*id).name.as_str())
        .collect();
    assert_eq!(read_names, ["v1", "v2", "v3", "v0"]);
    // MXNet drops a read of a var the op also writes.
    assert_eq!(sum.const_vars().len(), 3);
    assert_eq!(sum.mutable_vars(), vec![graph.tensor_id("v0").unwrap()]);
}

#[test]
fn devices_and_properties_are_inferred_from_the_tensors() {
    let graph = load(
        r#"
description = "devices"
default_device = "gpu:1"
tensor = [
  { name = "host", shape = [4], device = "cpu" },
  { name = "dev", shape = [4] },
  { name = "w", shape = [4] },
]
op = [
  { name = "up", kernel = "copy_h2d", reads = ["host"], writes = ["dev"] },
  { name = "update", kernel = "sgd", reads = ["dev"], writes = ["w"], property = "prioritized" },
  { name = "down", kernel = "copy_d2h", reads = ["w"], writes = ["host"], priority = "-3" },
]
"#,
    )
    .unwrap();
    let summary: Vec<(Context, FnProperty, i32)> = graph
        .ops
        .iter()
        .map(|op| (op.device, op.property, op.priority))
        .collect();
    assert_eq!(
        summary,
        [
            (Context::gpu(1), FnProperty::CopyToGpu, 0),
            (Context::gpu(1), FnProperty::GpuPrioritized, 0),
            (Context::gpu(1), FnProperty::CopyFromGpu, -3),
        ]
    );
    assert!(graph.uses_gpu());
}

#[test]
fn kernel_params_get_their_defaults() {
    let graph = load(
        r#"
description = "defaults"
tensor = [
  { name = "x", shape = [1, 2, 8, 8] },
  { name = "y", shape = [1, 2, 2, 2] },
  { name = "g", shape = [4] },
  { name = "w", shape = [4] },
]
op = [
  { name = "pool", kernel = "avg_pool", reads = ["x"], writes = ["y"], params = { size = 4 } },
  { name = "sgd", kernel = "sgd", reads = ["g"], writes = ["w"] },
]
"#,
    )
    .unwrap();
    let pool = &graph.ops[0].params;
    assert_eq!(
        (
            pool.int("size", 0),
            pool.int("stride", 0),
            pool.int("pad", 9)
        ),
        (4, 4, 0)
    );
    assert_eq!(graph.ops[1].params.float("lr", 0.0), 0.01);
    assert_eq!(graph.op_flops(&graph.ops[0]), 8 * 16);
}

#[test]
fn logic_short_circuits_and_and_binds_tighter_than_or() {
    let graph = load(
        r#"
description = "logic"
tensor = [{ name = "x", shape = [1] }]
[params]
n = 0

[[block]]
when = "n == 0 || 10 / n > 1"
op = [{ name = "guarded", kernel = "fold", writes = ["x"] }]

[[block]]
when = "1 || 0 && 0"
op = [{ name = "and_first", kernel = "fold", writes = ["x"] }]

[[op]]
name = "${n > 0 ? 'p' + 10 / n : 'zero'}"
kernel = "fold"
writes = ["x"]
"#,
    )
    .unwrap();
    assert_eq!(names(&graph), ["guarded", "and_first", "zero"]);
}

#[test]
fn kernel_flags_take_true_false_one_and_zero_also_as_strings() {
    let text = |flag: &str| {
        format!(
            r#"
description = "flags"
tensor = [{{ name = "a", shape = [4, 8] }}, {{ name = "b", shape = [4, 8] }}, {{ name = "c", shape = [4, 4] }}]
op = [{{ name = "mm", kernel = "gemm", reads = ["a", "b"], writes = ["c"], params = {{ transpose_b = {flag} }} }}]
"#
        )
    };
    for flag in ["1", "true", "\"1\"", "\"true\"", "\"True\""] {
        let graph = load(&text(flag)).unwrap_or_else(|err| panic!("{flag}: {err}"));
        assert_eq!(graph.ops[0].params.int("transpose_b", 0), 1, "{flag}");
    }
    let err = load(&text("\"on\"")).unwrap_err().to_string();
    assert!(
        err.ends_with("parameter transpose_b = \"on\": expected true, false, 1 or 0"),
        "{err}"
    );
}

#[test]
fn a_boolean_parameter_takes_one_and_zero_from_set() {
    let text = r#"
description = "a flag"
tensor = [{ name = "x", shape = [1] }]
[params]
fused = false

[[block]]
when = "fused"
op = [{ name = "fused_op", kernel = "fold", writes = ["x"] }]

[[op]]
name = "plain"
kernel = "fold"
writes = ["x"]
"#;
    let with = |value: &str| {
        let overrides = Overrides::from_args([format!("fused={value}")]).unwrap();
        let graph = load_str(text, "t.toml", &overrides).unwrap();
        graph.ops.len()
    };
    assert_eq!(
        (with("1"), with("0"), with("true"), with("false")),
        (2, 1, 2, 1)
    );
}

/// `n` u8 tensors of 2^32 elements (16 GiB each as f32) and `extra` more elements.
fn u8_tensors(n: usize, extra: usize) -> String {
    let mut text = String::from("description = \"big\"\ntensor = [\n");
    for k in 0..n {
        text += &format!("  {{ name = \"t{k}\", shape = [65536, 65536], dtype = \"u8\" }},\n");
    }
    if extra > 0 {
        text += &format!("  {{ name = \"extra\", shape = [{extra}], dtype = \"u8\" }},\n");
    }
    text + "]\nop = [{ name = \"touch\", kernel = \"fold\", writes = [\"t0\"] }]\n"
}

#[test]
fn the_memory_cap_counts_every_tensor_as_f32() {
    // 4 x 2^32 elements x 4 bytes = 64 GiB exactly: at the cap (16 GiB at 1 byte each).
    let at_cap = load(&u8_tensors(4, 0)).unwrap();
    assert_eq!(at_cap.tensor_bytes(), 64 << 30);
    let err = load(&u8_tensors(4, 1)).unwrap_err().to_string();
    assert!(
        err.contains(
            "tensor \"extra\" has shape [1]: the tensors reach 64.0 GiB here, held as \
             f32 (4 bytes an element, whatever the dtype): expected at most 64.0 GiB"
        ),
        "{err}"
    );
}
