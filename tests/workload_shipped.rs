//! The shipped workloads load, have the shapes their descriptions promise, and stay within
//! the size budget (one iteration well under a second on 2 cores).
use std::collections::HashSet;
use std::path::Path;

use enginetop::workload::{
    catalog, load_path, load_spec, Context, FnProperty, Graph, KernelKind, Overrides, SHIPPED,
};

fn load(name: &str) -> Graph {
    load_spec(name, &Overrides::default()).unwrap_or_else(|err| panic!("{err}"))
}

fn load_with(name: &str, sets: &[&str]) -> Graph {
    let overrides = Overrides::from_args(sets).unwrap();
    load_spec(name, &overrides).unwrap_or_else(|err| panic!("{err}"))
}

fn op_names(graph: &Graph) -> Vec<&str> {
    graph.ops.iter().map(|op| op.name.as_str()).collect()
}

/// Every op's tensor ids are in range, written tensors are distinct, names are unique.
fn assert_well_formed(graph: &Graph) {
    let tensors = graph.tensors.len();
    for op in &graph.ops {
        for id in op
            .reads
            .iter()
            .chain(&op.writes)
            .chain(&op.also_reads)
            .chain(&op.also_writes)
        {
            assert!(id.index() < tensors, "{}: {id:?}", op.name);
        }
        let mutable = op.mutable_vars();
        assert!(
            op.const_vars().iter().all(|id| !mutable.contains(id)),
            "{}",
            op.name
        );
    }
    let names: HashSet<&str> = op_names(graph).into_iter().collect();
    assert_eq!(
        names.len(),
        graph.ops.len(),
        "{}: duplicate op names",
        graph.name
    );
    assert_eq!(graph.setup.end, graph.iteration.start);
    assert_eq!(graph.iteration.end, graph.ops.len());
}

#[test]
fn every_shipped_workload_loads_with_its_defaults() {
    for workload in SHIPPED {
        let graph = load(workload.name);
        assert_eq!(graph.name, workload.name);
        assert!(!graph.description.is_empty());
        assert!(
            graph.description.len() <= 90,
            "{}: description too long for one line",
            graph.name
        );
        assert!(!graph.iteration_ops().is_empty());
        assert_well_formed(&graph);
    }
}

#[test]
fn the_workloads_folder_and_the_shipped_list_agree() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads");
    let mut on_disk: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut shipped: Vec<String> = SHIPPED.iter().map(|w| w.name.to_string()).collect();
    shipped.sort();
    assert_eq!(on_disk, shipped);
    for workload in SHIPPED {
        let path = folder.join(format!("{}.toml", workload.name));
        let from_path = load_path(&path, &Overrides::default()).unwrap();
        assert_eq!(from_path.ops, load(workload.name).ops);
    }
}

#[test]
fn iterations_stay_within_the_two_core_budget() {
    for workload in SHIPPED {
        let graph = load(workload.name);
        let gflop = graph.iteration_flops() as f64 / 1e9;
        // Well under a second on 2 cores: resnet-like's ~60 GFLOP (batch 8, ResNet-50's
        // widths) run in about 0.4 s at the ~150 GFLOP/s it reaches there, in ~650 MiB of
        // tensors (other workloads run far below peak, so their budgets stay 3 GFLOP and
        // 256 MiB).
        let resnet = graph.name == "resnet-like";
        let (budget, bytes) = if resnet {
            (64.0, 768 << 20)
        } else {
            (3.0, 256 << 20)
        };
        assert!(
            gflop <= budget,
            "{}: {gflop} GFLOP per iteration",
            graph.name
        );
        assert!(graph.iteration_ops().len() <= 20_000, "{}", graph.name);
        assert!(
            graph.tensor_bytes() <= bytes,
            "{}: {} bytes",
            graph.name,
            graph.tensor_bytes()
        );
    }
}

#[test]
fn resnet_like_is_resnet_50_shaped_with_backward_and_updates() {
    let graph = load("resnet-like");
    let count = |kernel| graph.ops.iter().filter(|op| op.kernel == kernel).count();
    // 16 bottlenecks x 3 convs + 4 projections + stem + classifier = 54 forward convs;
    // backward: a weight gradient per conv, an input gradient per conv but the stem's.
    assert_eq!(count(KernelKind::Conv2d), 54);
    assert_eq!(count(KernelKind::Conv2dGradWeight), 54);
    assert_eq!(count(KernelKind::Conv2dGradInput), 53);
    // A gradient per batch norm and pool; one loss gradient. The stem's and each
    // bottleneck's first two batch norms have their relu fused (batch_norm_relu), the third
    // its residual add and relu (batch_norm_add_relu); the projections' batch norms stand
    // alone. Every batch norm's gradient but the projections' masks by a relu's output
    // (batch_norm_relu_grad), and so do the projections' (their output's gradient is the
    // masked sum's); each identity shortcut's gradient is masked as it is summed into the
    // block input's (relu_grad_add), each projection's summed by an add.
    assert_eq!(count(KernelKind::BatchNormRelu), 1 + 16 * 2);
    assert_eq!(count(KernelKind::BatchNormAddRelu), 16);
    assert_eq!(count(KernelKind::BatchNorm), 4);
    assert_eq!(count(KernelKind::BatchNormGrad), 0);
    assert_eq!(
        count(KernelKind::BatchNormReluGrad),
        count(KernelKind::BatchNormRelu)
            + count(KernelKind::BatchNormAddRelu)
            + count(KernelKind::BatchNorm)
    );
    assert_eq!(count(KernelKind::Relu), 0);
    assert_eq!(count(KernelKind::ReluGrad), 0);
    assert_eq!(count(KernelKind::ReluGradAdd), 16 - 4);
    assert_eq!(count(KernelKind::Add), 4);
    assert_eq!(count(KernelKind::AvgPoolGrad), count(KernelKind::AvgPool));
    assert_eq!(count(KernelKind::MaxPoolGrad), 1);
    assert_eq!(count(KernelKind::SoftmaxXentGrad), 1);
    // One update per conv weight (54) and per batch norm (53).
    assert_eq!(count(KernelKind::Sgd), 107);
    let gflop = graph.iteration_flops() as f64 / 1e9;
    assert!((58.0..=63.0).contains(&gflop), "{gflop} GFLOP");
    for op in graph
        .iteration_ops()
        .iter()
        .filter(|op| op.kernel == KernelKind::Sgd)
    {
        assert_eq!(op.property, FnProperty::CpuPrioritized, "{}", op.name);
        assert!(op.priority <= 0, "{}", op.name);
    }
    let names = op_names(&graph);
    let position = |name: &str| names.iter().position(|n| *n == name).unwrap();
    assert!(position("stem_conv") < position("s4b2_conv3"));
    assert!(position("s4b2_conv3") < position("loss_grad"));
    assert!(position("loss_grad") < position("s4b2_conv3_grad_in"));
    assert!(position("s1b0_conv1_grad_w") < position("s1b0_w1_sgd"));
    assert!(!graph.uses_gpu());
    assert!(!names.contains(&"copy_images"));
}

#[test]
fn resnet_like_on_a_gpu_receives_its_batches_through_copies() {
    let graph = load_with("resnet-like", &["device=gpu:0"]);
    let copies: Vec<_> = graph
        .ops
        .iter()
        .filter(|op| op.kernel == KernelKind::CopyH2d)
        .collect();
    assert_eq!(copies.len(), 2);
    for copy in copies {
        assert_eq!(copy.device, Context::gpu(0));
        assert_eq!(copy.property, FnProperty::CopyToGpu);
        assert_eq!(graph.tensor(copy.reads[0]).device, Context::cpu(0));
    }
    let updates = graph.ops.iter().filter(|op| op.kernel == KernelKind::Sgd);
    assert!(updates
        .clone()
        .all(|op| op.property == FnProperty::GpuPrioritized));
    assert_eq!(graph.ops[0].name, "copy_images");
}

#[test]
fn resnet_like_scales_with_its_parameters() {
    let small = load_with("resnet-like", &["blocks3=2", "batch=1"]);
    let default = load("resnet-like");
    assert!(small.iteration_ops().len() < default.iteration_ops().len());
    let deeper = load_with("resnet-like", &["blocks3=23"]);
    assert_eq!(
        deeper.iteration_ops().len() - default.iteration_ops().len(),
        17 * 22
    );
}

#[test]
fn transformer_like_has_per_head_attention_and_mlp_gemms() {
    let graph = load("transformer-like");
    let names = op_names(&graph);
    for name in ["l0h0_qk", "l5h3_pv", "l0_mlp_up", "vocab_proj"] {
        assert!(names.contains(&name), "{name}");
    }
    let qk = graph.ops.iter().find(|op| op.name == "l0h0_qk").unwrap();
    assert_eq!(graph.tensor(qk.writes[0]).shape, vec![128, 128]);
    let gflop = graph.iteration_flops() as f64 / 1e9;
    assert!((1.0..=2.0).contains(&gflop), "{gflop}");
    let gpu = load_with("transformer-like", &["device=gpu:1"]);
    let kinds: Vec<KernelKind> = gpu.ops.iter().map(|op| op.kernel).collect();
    assert_eq!(kinds.first(), Some(&KernelKind::CopyH2d));
    assert_eq!(kinds.last(), Some(&KernelKind::CopyD2h));
    assert_eq!(gpu.ops.last().unwrap().device, Context::gpu(1));
}

#[test]
fn engine_shapes_follow_benchmarks_md() {
    let chain = load_with("chain", &["length=50"]);
    assert_eq!(chain.ops.len(), 50);
    assert!(chain
        .ops
        .iter()
        .all(|op| op.mutable_vars() == chain.ops[0].mutable_vars()));

    let tree = load_with("tree", &["nodes=7"]);
    let parents: Vec<Vec<String>> = tree
        .ops
        .iter()
        .map(|op| {
            op.reads
                .iter()
                .map(|id| tree.tensor(*id).name.clone())
                .collect()
        })
        .collect();
    assert_eq!(
        parents,
        [
            vec![],
            vec!["t1"],
            vec!["t1"],
            vec!["t2"],
            vec!["t2"],
            vec!["t3"],
            vec!["t3"]
        ]
    );

    let wave = load_with("wavefront", &["n=3"]);
    let reads: Vec<usize> = wave.ops.iter().map(|op| op.reads.len()).collect();
    assert_eq!(reads, [0, 1, 1, 1, 2, 2, 1, 2, 2]);

    let independent = load("embarrassing");
    assert!(independent.ops.iter().all(|op| op.reads.is_empty()));
    assert_eq!(independent.tensors.len(), 1024);
}

#[test]
fn random_dag_is_mxnets_rand_sum_expr_and_deterministic() {
    let graph = load("random-dag");
    assert_eq!(graph.ops.len(), 10_000);
    assert_eq!(graph.tensors.len(), 100);
    for op in &graph.ops {
        assert_eq!(op.kernel, KernelKind::SumExpr);
        assert!((2..=19).contains(&op.reads.len()), "{}", op.name);
        assert!((1..=9).contains(&op.params.int("us", 0)), "{}", op.name);
    }
    assert_eq!(graph, load("random-dag"));
    assert_ne!(graph.ops, load_with("random-dag", &["seed=7"]).ops);
}

#[test]
fn pipeline_overlaps_reads_with_compute_through_rotating_slots() {
    let graph = load("pipeline");
    let io: Vec<_> = graph
        .ops
        .iter()
        .filter(|op| op.kernel == KernelKind::SleepUs)
        .collect();
    assert_eq!(io.len(), 16);
    assert_ne!(io[0].writes, io[1].writes);
    assert_eq!(io[0].writes, io[2].writes);
    let gpu = load_with("pipeline", &["device=gpu:0"]);
    assert_eq!(
        gpu.ops
            .iter()
            .filter(|op| op.kernel == KernelKind::CopyH2d)
            .count(),
        16
    );
}

#[test]
fn the_catalog_has_one_line_per_workload() {
    let text = catalog();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), SHIPPED.len() + 1);
    for (line, workload) in lines[1..].iter().zip(SHIPPED) {
        assert!(line.starts_with(workload.name), "{line}");
        assert!(!line.contains("error"), "{line}");
    }
}
