//! Tests of the configuration layers, parsers, errors and warnings.

use super::*;
use std::collections::HashMap;

/// A lookup over fixed `(name, value)` pairs.
fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let vars: HashMap<String, String> = pairs
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    move |name| vars.get(name).cloned()
}

fn load(pairs: &[(&str, &str)], overrides: &ConfigOverrides) -> RuntimeConfig {
    RuntimeConfig::load_with(env_of(pairs), overrides).unwrap()
}

fn load_err(pairs: &[(&str, &str)]) -> String {
    RuntimeConfig::from_env_with(env_of(pairs))
        .unwrap_err()
        .to_string()
}

#[test]
fn defaults_are_tensorflows() {
    let config = load(&[], &ConfigOverrides::default());
    assert_eq!(config.pool_kind, PoolKind::Eigen);
    assert_eq!((config.inter_op_threads, config.intra_op_threads), (0, 0));
    assert!(config.allow_spinning);
    assert_eq!(config.schedulable_cpus, schedulable_cpus());
    assert!(config.max_threads >= DEFAULT_MAX_THREADS.min(HARD_MAX_THREADS));
    assert_eq!(config, RuntimeConfig::default());
}

#[test]
fn tf_env_beats_default() {
    let env = [
        ("TF_NUM_INTEROP_THREADS", "3"),
        ("TF_NUM_INTRAOP_THREADS", "5"),
    ];
    let config = load(&env, &ConfigOverrides::default());
    assert_eq!((config.inter_op_threads, config.intra_op_threads), (3, 5));
}

#[test]
fn our_env_beats_tf_env() {
    let env = [
        ("TF_NUM_INTEROP_THREADS", "3"),
        ("TF_NUM_INTRAOP_THREADS", "5"),
        ("ENGINETOP_INTER_OP_THREADS", "2"),
        ("ENGINETOP_INTRA_OP_THREADS", "7"),
    ];
    let config = load(&env, &ConfigOverrides::default());
    assert_eq!((config.inter_op_threads, config.intra_op_threads), (2, 7));
}

#[test]
fn explicit_overrides_beat_every_env_var() {
    let env = [
        ("TF_NUM_INTEROP_THREADS", "3"),
        ("ENGINETOP_INTER_OP_THREADS", "2"),
        ("TF_NUM_INTRAOP_THREADS", "5"),
        ("ENGINETOP_INTRA_OP_THREADS", "7"),
        ("ENGINETOP_POOL", "chase-lev"),
        ("ENGINETOP_SPIN", "off"),
        ("ENGINETOP_MAX_THREADS", "64"),
    ];
    let flags = ConfigOverrides {
        pool_kind: Some(PoolKind::Simple),
        inter_op_threads: Some(1),
        intra_op_threads: Some(9),
        allow_spinning: Some(true),
        max_threads: Some(32),
        gpus: Some(GpuSelection::None),
        ..Default::default()
    };
    let config = load(&env, &flags);
    assert_eq!(config.pool_kind, PoolKind::Simple);
    assert_eq!((config.inter_op_threads, config.intra_op_threads), (1, 9));
    assert!(config.allow_spinning);
    assert_eq!(config.max_threads, 32);
    assert_eq!(config.gpus, GpuSelection::None);
}

#[test]
fn each_layer_only_replaces_what_it_sets() {
    let env = [
        ("ENGINETOP_POOL", "simple"),
        ("TF_NUM_INTRAOP_THREADS", "2"),
    ];
    let flags = ConfigOverrides {
        inter_op_threads: Some(1),
        ..Default::default()
    };
    let config = load(&env, &flags);
    assert_eq!(config.pool_kind, PoolKind::Simple);
    assert_eq!((config.inter_op_threads, config.intra_op_threads), (1, 2));
    assert!(
        config.allow_spinning,
        "unset ENGINETOP_SPIN keeps the default"
    );
}

#[test]
fn pool_and_spin_come_from_env() {
    let config = load(
        &[("ENGINETOP_POOL", " Chase-Lev "), ("ENGINETOP_SPIN", "0")],
        &ConfigOverrides::default(),
    );
    assert_eq!(config.pool_kind, PoolKind::ChaseLev);
    assert!(!config.allow_spinning);
}

#[test]
fn every_switch_spelling_parses() {
    for (text, expected) in [
        ("true", true),
        ("1", true),
        ("on", true),
        ("YES", true),
        ("false", false),
        ("0", false),
        ("Off", false),
        ("no", false),
    ] {
        let config = load(&[("ENGINETOP_SPIN", text)], &ConfigOverrides::default());
        assert_eq!(config.allow_spinning, expected, "ENGINETOP_SPIN={text}");
    }
}

#[test]
fn empty_env_value_counts_as_unset() {
    let env = [
        ("TF_NUM_INTRAOP_THREADS", "3"),
        ("ENGINETOP_INTRA_OP_THREADS", ""),
    ];
    let config = load(&env, &ConfigOverrides::default());
    assert_eq!(config.intra_op_threads, 3);
}

#[test]
fn zero_resolves_to_the_cpu_count() {
    let config = load(
        &[("TF_NUM_INTEROP_THREADS", "0")],
        &ConfigOverrides::default(),
    );
    assert_eq!(config.effective_inter_op_threads(), schedulable_cpus());
    assert_eq!(config.effective_intra_op_threads(), schedulable_cpus());

    let config = RuntimeConfig {
        inter_op_threads: 2,
        schedulable_cpus: 6,
        ..RuntimeConfig::default()
    };
    let expected = ResolvedThreads {
        inter_op: 2,
        intra_op: 6,
    };
    assert_eq!(config.resolved(), expected);
}

#[test]
fn zero_resolves_to_at_most_max_threads() {
    let config = RuntimeConfig {
        schedulable_cpus: 64,
        max_threads: 8,
        ..RuntimeConfig::default()
    };
    assert_eq!(config.effective_intra_op_threads(), 8);
}

#[test]
fn a_word_for_a_thread_count_names_variable_value_and_fix() {
    assert_eq!(
        load_err(&[("TF_NUM_INTRAOP_THREADS", "lots")]),
        format!(
            "TF_NUM_INTRAOP_THREADS=\"lots\" is not a thread count: expected a whole number \
             from 0 to max_threads = {} (0 = one per CPU); unset it or set e.g. \
             TF_NUM_INTRAOP_THREADS=4",
            RuntimeConfig::default().max_threads
        )
    );
}

/// The engine's priority and GPU pools read `0` as MXNet's defaults, and say so.
#[test]
fn a_bad_engine_count_says_what_zero_picks_for_it() {
    let priority = load_err(&[("MXNET_CPU_PRIORITY_NTHREADS", "x")]);
    let zero = format!("(0 = MXNet's default, {DEFAULT_CPU_PRIORITY_WORKERS})");
    assert!(priority.contains(&zero), "{priority}");
    let copy = load_err(&[("MXNET_GPU_COPY_NTHREADS", "x")]);
    let zero = format!("(0 = MXNet's default, {DEFAULT_GPU_WORKERS})");
    assert!(copy.contains(&zero), "{copy}");
    let config = RuntimeConfig {
        cpu_priority_workers: 0,
        ..Default::default()
    };
    assert_eq!(
        config.resolved_engine_workers().cpu_priority,
        DEFAULT_CPU_PRIORITY_WORKERS
    );
}

#[test]
fn every_thread_count_variable_rejects_bad_numbers() {
    let names = [
        "TF_NUM_INTEROP_THREADS",
        "TF_NUM_INTRAOP_THREADS",
        "ENGINETOP_INTER_OP_THREADS",
        "ENGINETOP_INTRA_OP_THREADS",
    ];
    for name in names {
        for bad in ["-1", "2.5", "4 threads", "0x10", "\u{0}"] {
            let message = load_err(&[(name, bad)]);
            let shown = format!("{name}={bad:?} is not a thread count");
            assert!(message.starts_with(&shown), "{message}");
            assert!(
                message.ends_with(&format!("set e.g. {name}=4")),
                "{message}"
            );
        }
    }
}

#[test]
fn a_shadowed_bad_tf_value_is_still_an_error() {
    let env = [
        ("TF_NUM_INTEROP_THREADS", "many"),
        ("ENGINETOP_INTER_OP_THREADS", "2"),
    ];
    assert!(load_err(&env).starts_with("TF_NUM_INTEROP_THREADS=\"many\""));
}

#[test]
fn absurd_thread_counts_name_the_limit() {
    let message = load_err(&[("ENGINETOP_INTRA_OP_THREADS", "100000")]);
    let max = RuntimeConfig::default().max_threads;
    assert!(
        message.starts_with(&format!(
            "ENGINETOP_INTRA_OP_THREADS=\"100000\" is too many threads: expected at most \
             max_threads = {max}"
        )),
        "{message}"
    );
    assert!(
        message.contains("ENGINETOP_MAX_THREADS or --max-threads"),
        "{message}"
    );

    let overflow = "99999999999999999999999999";
    let message = load_err(&[("TF_NUM_INTEROP_THREADS", overflow)]);
    let shown = format!("TF_NUM_INTEROP_THREADS=\"{overflow}\" is too many threads");
    assert!(message.starts_with(&shown), "{message}");
}

#[test]
fn a_raised_limit_admits_more_threads() {
    let env = [
        ("ENGINETOP_MAX_THREADS", "512"),
        ("TF_NUM_INTRAOP_THREADS", "300"),
    ];
    let config = load(&env, &ConfigOverrides::default());
    assert_eq!((config.max_threads, config.intra_op_threads), (512, 300));

    let env = [
        ("ENGINETOP_MAX_THREADS", "2"),
        ("TF_NUM_INTRAOP_THREADS", "3"),
    ];
    assert!(load_err(&env).contains("expected at most max_threads = 2"));
}

#[test]
fn bad_max_threads_is_an_error() {
    for bad in ["0", "5000", "none"] {
        let message = load_err(&[("ENGINETOP_MAX_THREADS", bad)]);
        let shown = format!(
            "ENGINETOP_MAX_THREADS={bad:?} is not a usable thread limit: expected a whole \
             number from 1 to {HARD_MAX_THREADS}"
        );
        assert!(message.starts_with(&shown), "{message}");
    }
}

#[test]
fn bad_pool_kind_names_the_choices() {
    assert_eq!(
        load_err(&[("ENGINETOP_POOL", "fast")]),
        "ENGINETOP_POOL=\"fast\" is not a pool kind: expected one of simple, eigen, \
         chase-lev; unset it or set e.g. ENGINETOP_POOL=eigen"
    );
}

#[test]
fn gpus_come_from_env_then_flag() {
    let defaults = load(&[], &ConfigOverrides::default());
    assert_eq!(defaults.gpus, GpuSelection::Auto);
    let env = [("ENGINETOP_GPUS", "sim:2")];
    assert_eq!(
        load(&env, &ConfigOverrides::default()).gpus,
        GpuSelection::Sim(2)
    );
    let flags = ConfigOverrides {
        gpus: Some(GpuSelection::None),
        ..Default::default()
    };
    assert_eq!(load(&env, &flags).gpus, GpuSelection::None);
}

#[test]
fn gpu_sync_comes_from_env_then_flag_and_bad_values_name_the_fix() {
    assert_eq!(
        load(&[], &ConfigOverrides::default()).gpu_sync,
        GpuSyncMode::Event
    );
    let env = [("ENGINETOP_GPU_SYNC", "sync")];
    assert_eq!(
        load(&env, &ConfigOverrides::default()).gpu_sync,
        GpuSyncMode::PerOp
    );
    let flags = ConfigOverrides {
        gpu_sync: Some(GpuSyncMode::Event),
        ..Default::default()
    };
    assert_eq!(load(&env, &flags).gpu_sync, GpuSyncMode::Event);
    assert_eq!(
        load_err(&[("ENGINETOP_GPU_SYNC", "sometimes")]),
        "ENGINETOP_GPU_SYNC=\"sometimes\" is not a GPU sync mode: expected event (dependencies \
         on events) or sync (a host sync after every op); unset it or set e.g. \
         ENGINETOP_GPU_SYNC=event"
    );
}

#[test]
fn bad_gpus_names_the_forms_and_the_fix() {
    assert_eq!(
        load_err(&[("ENGINETOP_GPUS", "sim:0")]),
        "ENGINETOP_GPUS=\"sim:0\" is not a GPU selection: expected none, auto, cuda or sim:N \
         with N from 1 to 16 (sim:0 asks for no GPUs: use none); unset it or set e.g. \
         ENGINETOP_GPUS=sim:1"
    );
}

#[test]
fn bad_switch_names_the_spellings() {
    assert_eq!(
        load_err(&[("ENGINETOP_SPIN", "maybe")]),
        "ENGINETOP_SPIN=\"maybe\" is not a switch: expected true/false, 1/0, on/off or \
         yes/no; unset it or set e.g. ENGINETOP_SPIN=false"
    );
}

#[test]
fn bad_flags_name_the_flag() {
    let flags = ConfigOverrides {
        inter_op_threads: Some(10_000),
        max_threads: Some(16),
        ..Default::default()
    };
    let message = RuntimeConfig::load_with(env_of(&[]), &flags)
        .unwrap_err()
        .to_string();
    assert!(
        message.starts_with("--inter-op-threads 10000 is too many threads: expected at most max_threads = 16; pass e.g. --inter-op-threads 4"),
        "{message}"
    );

    let flags = ConfigOverrides {
        max_threads: Some(0),
        ..Default::default()
    };
    let message = RuntimeConfig::load_with(env_of(&[]), &flags)
        .unwrap_err()
        .to_string();
    assert!(
        message.starts_with("--max-threads 0 is not a usable thread limit"),
        "{message}"
    );
}

#[test]
fn validate_names_the_field() {
    let mut config = RuntimeConfig::default();
    assert_eq!(config.validate(), Ok(()));
    config.max_threads = 0;
    let message = config.validate().unwrap_err().to_string();
    assert!(
        message.starts_with("max_threads = 0 is not a usable thread limit"),
        "{message}"
    );
}

#[test]
fn engine_kind_comes_from_mxnet_then_ours_then_the_flag() {
    let default = load(&[], &ConfigOverrides::default());
    assert_eq!(default.engine_kind, EngineKind::PerDevice);
    let mxnet = load(
        &[("MXNET_ENGINE_TYPE", "NaiveEngine")],
        &ConfigOverrides::default(),
    );
    assert_eq!(mxnet.engine_kind, EngineKind::Naive);
    let ours = load(
        &[
            ("MXNET_ENGINE_TYPE", "NaiveEngine"),
            ("ENGINETOP_ENGINE", "pooled"),
        ],
        &ConfigOverrides::default(),
    );
    assert_eq!(ours.engine_kind, EngineKind::Pooled);
    let flags = ConfigOverrides {
        engine_kind: Some(EngineKind::Naive),
        ..Default::default()
    };
    let flagged = load(&[("ENGINETOP_ENGINE", "ThreadedEnginePerDevice")], &flags);
    assert_eq!(flagged.engine_kind, EngineKind::Naive);
}

#[test]
fn bad_engine_names_list_ours_and_mxnets() {
    assert_eq!(
        load_err(&[("MXNET_ENGINE_TYPE", "ThreadedEnginePerDeviceAsync")]),
        "MXNET_ENGINE_TYPE=\"ThreadedEnginePerDeviceAsync\" is not an engine: expected one of \
         naive, pooled, per-device (or MXNet's NaiveEngine, ThreadedEngine, \
         ThreadedEnginePerDevice; for the *Async variants use per-device, whose GPU ops wait \
         on events unless ENGINETOP_GPU_SYNC=sync); unset it or set e.g. \
         MXNET_ENGINE_TYPE=per-device"
    );
}

#[test]
fn engine_worker_counts_come_from_mxnet_names_ours_and_flags() {
    let env = [
        ("MXNET_CPU_WORKER_NTHREADS", "3"),
        ("MXNET_CPU_PRIORITY_NTHREADS", "6"),
        ("MXNET_GPU_WORKER_NTHREADS", "5"),
        ("MXNET_GPU_COPY_NTHREADS", "7"),
        ("ENGINETOP_GPU_COPY_WORKERS", "1"),
    ];
    let flags = ConfigOverrides {
        cpu_workers: Some(2),
        ..Default::default()
    };
    let config = load(&env, &flags);
    assert_eq!(
        (
            config.cpu_workers,
            config.cpu_priority_workers,
            config.gpu_workers,
            config.gpu_copy_workers
        ),
        (2, 6, 5, 1)
    );
    assert!(load_err(&[("MXNET_CPU_WORKER_NTHREADS", "two")])
        .starts_with("MXNET_CPU_WORKER_NTHREADS=\"two\" is not a thread count"));
}

#[test]
fn engine_worker_zeros_resolve_to_cpus_and_mxnet_defaults() {
    let config = RuntimeConfig {
        schedulable_cpus: 6,
        ..RuntimeConfig::default()
    };
    let workers = config.resolved_engine_workers();
    assert_eq!(
        (
            workers.cpu,
            workers.cpu_priority,
            workers.gpu,
            workers.gpu_copy
        ),
        (6, 4, 2, 2)
    );
    let bad = RuntimeConfig {
        gpu_copy_workers: 100_000,
        ..RuntimeConfig::default()
    };
    assert!(bad
        .validate()
        .unwrap_err()
        .to_string()
        .contains("gpu_copy_workers"));
}

fn oversubscription(inter: usize, intra: usize, cpus: usize) -> Vec<ConfigWarning> {
    RuntimeConfig {
        inter_op_threads: inter,
        intra_op_threads: intra,
        schedulable_cpus: cpus,
        ..RuntimeConfig::default()
    }
    .warnings()
}

#[test]
fn oversubscription_warns_exactly_when_the_product_exceeds_the_cpus() {
    assert!(
        oversubscription(2, 2, 4).is_empty(),
        "2 x 2 = 4 fits 4 CPUs"
    );
    assert!(oversubscription(1, 4, 4).is_empty());
    assert!(oversubscription(4, 1, 4).is_empty());
    assert_eq!(
        oversubscription(2, 3, 4),
        [ConfigWarning::Oversubscribed {
            inter_op_threads: 2,
            intra_op_threads: 3,
            cpus: 4
        }]
    );
    assert_eq!(oversubscription(0, 0, 1), [], "1 x 1 on one CPU");
    assert_eq!(oversubscription(0, 1, 2), [], "0 resolves to 2; 2 x 1 fits");
    assert_eq!(
        oversubscription(0, 2, 2).len(),
        1,
        "a set intra count of 2 with the default inter (2) on two CPUs"
    );
}

#[test]
fn the_default_counts_oversubscribe_without_a_warning() {
    assert_eq!(
        oversubscription(0, 0, 2),
        [],
        "TF's defaults (2 x 2 on two CPUs) are not the user's doing"
    );
    let config = RuntimeConfig {
        cpu_workers: 4,
        schedulable_cpus: 2,
        ..RuntimeConfig::default()
    };
    assert!(
        matches!(
            config.warnings()[..],
            [ConfigWarning::Oversubscribed { .. }]
        ),
        "a set engine CPU worker count is a set inter-op count"
    );
}

#[test]
fn oversubscription_warning_reads_as_a_sentence_with_a_fix() {
    assert_eq!(
        oversubscription(2, 8, 4)[0].to_string(),
        "2 inter-op x 8 intra-op threads = 16 threads may want a CPU at once, but only 4 \
         are schedulable; lower the intra-op count, e.g. --intra-op-threads 2 \
         (or ENGINETOP_INTRA_OP_THREADS=2)"
    );
    assert_eq!(
        oversubscription(8, 2, 4)[0].to_string(),
        "8 inter-op x 2 intra-op threads = 16 threads may want a CPU at once, but only 4 \
         are schedulable; lower both, e.g. --inter-op-threads 4 --intra-op-threads 1"
    );
    assert_eq!(
        oversubscription(3, 1, 2)[0].to_string(),
        "3 inter-op x 1 intra-op threads = 3 threads may want a CPU at once, but only 2 \
         are schedulable; lower the inter-op count, e.g. --inter-op-threads 2 \
         (or ENGINETOP_INTER_OP_THREADS=2)"
    );
}

#[test]
fn mxnet_cpu_workers_size_the_inter_op_threads_when_no_inter_op_count_is_set() {
    let cpus = RuntimeConfig::default().schedulable_cpus;
    let config = load(
        &[("MXNET_CPU_WORKER_NTHREADS", "3")],
        &ConfigOverrides::default(),
    );
    assert_eq!(config.resolved().inter_op, 3);
    assert_eq!(config.resolved_engine_workers().cpu, 3);
    assert!(config
        .warnings()
        .iter()
        .all(|w| !matches!(w, ConfigWarning::InterOpDiffersFromCpuWorkers { .. })));

    let config = load(
        &[("TF_NUM_INTEROP_THREADS", "2")],
        &ConfigOverrides::default(),
    );
    assert_eq!(
        config.resolved_engine_workers().cpu,
        2,
        "and the other way round"
    );

    let config = load(&[], &ConfigOverrides::default());
    assert_eq!(config.resolved().inter_op, cpus.min(config.max_threads));
    assert_eq!(
        config.resolved_engine_workers().cpu,
        config.resolved().inter_op
    );
}

#[test]
fn differing_inter_op_and_cpu_worker_counts_warn_and_the_inter_op_count_wins() {
    let overrides = ConfigOverrides {
        inter_op_threads: Some(2),
        ..ConfigOverrides::default()
    };
    let config = load(&[("ENGINETOP_CPU_WORKERS", "4")], &overrides);
    assert_eq!(config.resolved().inter_op, 2);
    assert_eq!(
        config.resolved_engine_workers().cpu,
        2,
        "the engine gets the same count"
    );
    let warning = config
        .warnings()
        .into_iter()
        .find(|w| matches!(w, ConfigWarning::InterOpDiffersFromCpuWorkers { .. }))
        .expect("a warning naming both counts");
    assert_eq!(
        warning,
        ConfigWarning::InterOpDiffersFromCpuWorkers {
            inter: 2,
            cpu_workers: 4
        }
    );
    assert!(warning
        .to_string()
        .contains("running 2 (the inter-op count wins)"));
    assert!(warning.to_string().contains("MXNET_CPU_WORKER_NTHREADS"));

    let same = load(&[("ENGINETOP_CPU_WORKERS", "2")], &overrides);
    assert!(same
        .warnings()
        .iter()
        .all(|w| !matches!(w, ConfigWarning::InterOpDiffersFromCpuWorkers { .. })));
}

#[test]
fn the_naive_engine_runs_on_one_thread_and_says_an_inter_op_count_is_unused() {
    let overrides = ConfigOverrides {
        inter_op_threads: Some(4),
        engine_kind: Some(EngineKind::Naive),
        ..ConfigOverrides::default()
    };
    let config = load(&[], &overrides);
    assert_eq!(
        config.resolved().inter_op,
        1,
        "ops run on the pushing thread"
    );
    let intra = config.resolved().intra_op;
    assert_eq!(
        config.kernel_threads(),
        intra.min(config.schedulable_cpus.max(1))
    );
    let warnings = config.warnings();
    assert_eq!(warnings, [ConfigWarning::InterOpUnusedByNaive { inter: 4 }]);
    assert!(warnings[0]
        .to_string()
        .contains("--engine pooled or per-device"));
    let naive = ConfigOverrides {
        engine_kind: Some(EngineKind::Naive),
        ..ConfigOverrides::default()
    };
    let defaults = load(&[], &naive);
    assert!(defaults.warnings().is_empty());
    // Both counts set and different: unused either way, so only that is said.
    let both = load(&[("ENGINETOP_CPU_WORKERS", "2")], &overrides);
    assert_eq!(
        both.warnings(),
        [ConfigWarning::InterOpUnusedByNaive { inter: 4 }]
    );
}
