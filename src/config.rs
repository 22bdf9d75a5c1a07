//! Runtime configuration: one [`RuntimeConfig`] for the whole app, built in layers.
//!
//! # Layers
//! Every setting is resolved on its own, lowest layer first; a value set in a higher layer
//! replaces the one below it:
//! 1. **defaults** ([`RuntimeConfig::default`]): TensorFlow's `0` ("pick") for both thread
//!    counts, the `eigen` pool, spinning allowed, `max_threads = max(128, cpus)`;
//! 2. **environment**: TensorFlow's `TF_NUM_INTEROP_THREADS` / `TF_NUM_INTRAOP_THREADS`, then
//!    ours (`ENGINETOP_INTER_OP_THREADS`, `ENGINETOP_INTRA_OP_THREADS`, `ENGINETOP_POOL`,
//!    `ENGINETOP_SPIN`, `ENGINETOP_MAX_THREADS`; names in [`env`](mod@env)). Ours win when
//!    both are set. The engine's settings come from MXNet's names (`MXNET_ENGINE_TYPE`,
//!    `MXNET_CPU_WORKER_NTHREADS`, `MXNET_CPU_PRIORITY_NTHREADS`, `MXNET_GPU_WORKER_NTHREADS`,
//!    `MXNET_GPU_COPY_NTHREADS`), then ours (`ENGINETOP_ENGINE`, `ENGINETOP_CPU_WORKERS`, ...),
//!    ours winning again;
//!    `ENGINETOP_SPIN`, `ENGINETOP_MAX_THREADS`, `ENGINETOP_GPUS`, `ENGINETOP_GPU_SYNC`; names in
//!    [`env`](mod@env)). Ours win when both are set;
//! 3. **explicit overrides** ([`ConfigOverrides`], what the command line passes; flag names in
//!    [`flag`]).
//!
//! The environment is read through a lookup function ([`RuntimeConfig::from_env_with`],
//! [`RuntimeConfig::load_with`]), so tests hand in a map instead of touching the process
//! environment. A variable set to the empty string counts as unset (`export VAR=` clears it).
//!
//! # Errors, never panics
//! Every variable that is set is parsed, even one that a higher layer replaces, so a typo never
//! hides until the day the override goes away. A bad value is a [`ConfigError`] naming the
//! variable or flag, the value, what is expected and the fix. Thread counts above `max_threads`
//! are rejected; `max_threads` itself is at most [`HARD_MAX_THREADS`], because every pool
//! allocates a worker slot per possible thread up front.
//!
//! # Thread counts
//! `inter_op_threads` (ops running at once) and `intra_op_threads` (threads inside one op,
//! through `parallel_for`) mean what they mean in TensorFlow; `0` picks the number of
//! schedulable CPUs ([`schedulable_cpus`], which honours affinity masks and cgroup quotas),
//! capped at `max_threads`. [`RuntimeConfig::resolved`] gives the counts pools are built with.
//! [`RuntimeConfig::warnings`] reports when `inter x intra` exceeds the CPUs. TensorFlow's own
//! defaults (both `0`) do exactly that on any machine with more than one CPU, and so do ours:
//! the warning is the honest answer, and counts whose product fits the CPUs silence it.
//!
//! # Adding a setting
//! Add the field to [`RuntimeConfig`] (and its default), an `Option` to [`ConfigOverrides`], the
//! variable to [`env`](mod@env) and the flag to [`flag`], and one `layer` call in
//! [`RuntimeConfig::load_with`] with a parser that returns a [`ConfigError`].
#![forbid(unsafe_code)]

use std::fmt;
use std::str::FromStr;

use crate::device::discover::{self, GpuSelection};
use crate::engine::{EngineKind, GpuSyncMode};
use crate::pool::{PoolKind, DEFAULT_MAX_THREADS};

/// The environment variables we read.
pub mod env {
    /// TensorFlow's inter-op thread count.
    pub const TF_NUM_INTEROP_THREADS: &str = "TF_NUM_INTEROP_THREADS";
    /// TensorFlow's intra-op thread count.
    pub const TF_NUM_INTRAOP_THREADS: &str = "TF_NUM_INTRAOP_THREADS";
    /// Our inter-op thread count; wins over [`TF_NUM_INTEROP_THREADS`].
    pub const ENGINETOP_INTER_OP_THREADS: &str = "ENGINETOP_INTER_OP_THREADS";
    /// Our intra-op thread count; wins over [`TF_NUM_INTRAOP_THREADS`].
    pub const ENGINETOP_INTRA_OP_THREADS: &str = "ENGINETOP_INTRA_OP_THREADS";
    /// The pool kind: `simple`, `eigen` or `chase-lev`.
    pub const ENGINETOP_POOL: &str = "ENGINETOP_POOL";
    /// Whether idle workers may spin: `true/false`, `1/0`, `on/off`, `yes/no`.
    pub const ENGINETOP_SPIN: &str = "ENGINETOP_SPIN";
    /// The most threads any pool may be resized to.
    pub const ENGINETOP_MAX_THREADS: &str = "ENGINETOP_MAX_THREADS";
    /// MXNet's engine choice: `NaiveEngine`, `ThreadedEngine`, `ThreadedEnginePerDevice`.
    pub const MXNET_ENGINE_TYPE: &str = "MXNET_ENGINE_TYPE";
    /// Our engine choice (`naive`, `pooled`, `per-device`, or MXNet's names); wins over
    /// [`MXNET_ENGINE_TYPE`].
    pub const ENGINETOP_ENGINE: &str = "ENGINETOP_ENGINE";
    /// MXNet's CPU workers per device.
    pub const MXNET_CPU_WORKER_NTHREADS: &str = "MXNET_CPU_WORKER_NTHREADS";
    /// Our CPU workers per device; wins over [`MXNET_CPU_WORKER_NTHREADS`].
    pub const ENGINETOP_CPU_WORKERS: &str = "ENGINETOP_CPU_WORKERS";
    /// MXNet's CPU priority pool size.
    pub const MXNET_CPU_PRIORITY_NTHREADS: &str = "MXNET_CPU_PRIORITY_NTHREADS";
    /// Our CPU priority pool size; wins over [`MXNET_CPU_PRIORITY_NTHREADS`].
    pub const ENGINETOP_CPU_PRIORITY_WORKERS: &str = "ENGINETOP_CPU_PRIORITY_WORKERS";
    /// MXNet's GPU compute workers per device.
    pub const MXNET_GPU_WORKER_NTHREADS: &str = "MXNET_GPU_WORKER_NTHREADS";
    /// Our GPU compute workers per device; wins over [`MXNET_GPU_WORKER_NTHREADS`].
    pub const ENGINETOP_GPU_WORKERS: &str = "ENGINETOP_GPU_WORKERS";
    /// MXNet's GPU copy workers per device.
    pub const MXNET_GPU_COPY_NTHREADS: &str = "MXNET_GPU_COPY_NTHREADS";
    /// Our GPU copy workers per device; wins over [`MXNET_GPU_COPY_NTHREADS`].
    pub const ENGINETOP_GPU_COPY_WORKERS: &str = "ENGINETOP_GPU_COPY_WORKERS";
    /// Which GPUs: `none`, `auto`, `cuda` or `sim:N`.
    pub const ENGINETOP_GPUS: &str = "ENGINETOP_GPUS";
    /// How GPU dependencies are kept: `event` or `sync` (a host sync after every op).
    pub const ENGINETOP_GPU_SYNC: &str = "ENGINETOP_GPU_SYNC";
}

/// The command-line flags that fill [`ConfigOverrides`]; errors and warnings name them.
pub mod flag {
    /// Sets [`ConfigOverrides::inter_op_threads`](super::ConfigOverrides::inter_op_threads).
    pub const INTER_OP_THREADS: &str = "--inter-op-threads";
    /// Sets [`ConfigOverrides::intra_op_threads`](super::ConfigOverrides::intra_op_threads).
    pub const INTRA_OP_THREADS: &str = "--intra-op-threads";
    /// Sets [`ConfigOverrides::pool_kind`](super::ConfigOverrides::pool_kind).
    pub const POOL: &str = "--pool";
    /// Sets [`ConfigOverrides::allow_spinning`](super::ConfigOverrides::allow_spinning).
    pub const SPIN: &str = "--spin";
    /// Sets [`ConfigOverrides::max_threads`](super::ConfigOverrides::max_threads).
    pub const MAX_THREADS: &str = "--max-threads";
    /// Sets [`ConfigOverrides::engine_kind`](super::ConfigOverrides::engine_kind).
    pub const ENGINE: &str = "--engine";
    /// Sets [`ConfigOverrides::cpu_workers`](super::ConfigOverrides::cpu_workers).
    pub const CPU_WORKERS: &str = "--cpu-workers";
    /// Sets [`ConfigOverrides::cpu_priority_workers`](super::ConfigOverrides::cpu_priority_workers).
    pub const CPU_PRIORITY_WORKERS: &str = "--cpu-priority-workers";
    /// Sets [`ConfigOverrides::gpu_workers`](super::ConfigOverrides::gpu_workers).
    pub const GPU_WORKERS: &str = "--gpu-workers";
    /// Sets [`ConfigOverrides::gpu_copy_workers`](super::ConfigOverrides::gpu_copy_workers).
    pub const GPU_COPY_WORKERS: &str = "--gpu-copy-workers";
    /// Sets [`ConfigOverrides::gpus`](super::ConfigOverrides::gpus).
    pub const GPUS: &str = "--gpus";
    /// Sets [`ConfigOverrides::gpu_sync`](super::ConfigOverrides::gpu_sync).
    pub const GPU_SYNC: &str = "--gpu-sync";
}

/// The largest `max_threads` we accept: pools allocate a slot per possible worker up front.
pub const HARD_MAX_THREADS: usize = 4096;

/// CPUs this process may run on: `std::thread::available_parallelism`, which honours the
/// affinity mask and cgroup CPU quotas; 1 if it cannot tell.
pub fn schedulable_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |cpus| cpus.get())
}

/// The runtime's settings after layering (see the [module docs](self)).
///
/// ```
/// use enginetop::config::{ConfigOverrides, RuntimeConfig};
///
/// let env = |name: &str| (name == "TF_NUM_INTRAOP_THREADS").then(|| "2".to_string());
/// let flags = ConfigOverrides { inter_op_threads: Some(1), ..Default::default() };
/// let config = RuntimeConfig::load_with(env, &flags).unwrap();
/// assert_eq!((config.inter_op_threads, config.intra_op_threads), (1, 2));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Which pool implementation to build.
    pub pool_kind: PoolKind,
    /// Threads running independent ops at once; 0 = one per schedulable CPU.
    pub inter_op_threads: usize,
    /// Threads working inside one op; 0 = one per schedulable CPU.
    pub intra_op_threads: usize,
    /// Let one idle worker spin before parking (lower latency, burns a core while idle).
    pub allow_spinning: bool,
    /// The most threads any pool may have, now or after a live resize.
    pub max_threads: usize,
    /// CPUs this process may run on, detected by [`RuntimeConfig::default`]; `0` counts
    /// resolve to it and the oversubscription warning compares against it.
    pub schedulable_cpus: usize,
    /// Which dependency engine to run.
    pub engine_kind: EngineKind,
    /// Engine CPU workers per CPU device; 0 = one per schedulable CPU.
    pub cpu_workers: usize,
    /// Engine CPU priority pool size; 0 = MXNet's default, 4.
    pub cpu_priority_workers: usize,
    /// Engine GPU compute workers per GPU; 0 = MXNet's default, 2.
    pub gpu_workers: usize,
    /// Engine GPU copy workers per GPU; 0 = MXNet's default, 2.
    pub gpu_copy_workers: usize,
    /// Which GPUs to use (`auto`: CUDA if usable, else one simulated GPU with a notice).
    pub gpus: GpuSelection,
    /// How dependencies between GPU ops are kept (`event`, or `sync`: a sync after every op).
    pub gpu_sync: GpuSyncMode,
}

/// MXNet's default CPU priority pool size.
pub const DEFAULT_CPU_PRIORITY_WORKERS: usize = 4;
/// MXNet's default GPU compute and copy workers per GPU.
pub const DEFAULT_GPU_WORKERS: usize = 2;

impl Default for RuntimeConfig {
    /// TensorFlow's defaults (both counts 0 = pick), the `eigen` pool, spinning allowed.
    fn default() -> Self {
        let cpus = schedulable_cpus();
        Self {
            pool_kind: PoolKind::Eigen,
            inter_op_threads: 0,
            intra_op_threads: 0,
            allow_spinning: true,
            max_threads: DEFAULT_MAX_THREADS.max(cpus).min(HARD_MAX_THREADS),
            schedulable_cpus: cpus,
            engine_kind: EngineKind::PerDevice,
            cpu_workers: 0,
            cpu_priority_workers: 0,
            gpu_workers: 0,
            gpu_copy_workers: 0,
            gpus: GpuSelection::Auto,
            gpu_sync: GpuSyncMode::Event,
        }
    }
}

/// Explicit values that beat the environment: what the command line passes. `None` keeps the
/// layer below.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigOverrides {
    /// `--pool`.
    pub pool_kind: Option<PoolKind>,
    /// `--inter-op-threads`.
    pub inter_op_threads: Option<usize>,
    /// `--intra-op-threads`.
    pub intra_op_threads: Option<usize>,
    /// `--spin`.
    pub allow_spinning: Option<bool>,
    /// `--max-threads`.
    pub max_threads: Option<usize>,
    /// `--engine`.
    pub engine_kind: Option<EngineKind>,
    /// `--cpu-workers`.
    pub cpu_workers: Option<usize>,
    /// `--cpu-priority-workers`.
    pub cpu_priority_workers: Option<usize>,
    /// `--gpu-workers`.
    pub gpu_workers: Option<usize>,
    /// `--gpu-copy-workers`.
    pub gpu_copy_workers: Option<usize>,
    /// `--gpus`.
    pub gpus: Option<GpuSelection>,
    /// `--gpu-sync`.
    pub gpu_sync: Option<GpuSyncMode>,
}

/// The engine's worker counts, `0` resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResolvedEngineWorkers {
    /// CPU workers per CPU device.
    pub cpu: usize,
    /// CPU priority pool size.
    pub cpu_priority: usize,
    /// GPU compute workers per GPU.
    pub gpu: usize,
    /// GPU copy workers per GPU.
    pub gpu_copy: usize,
}

/// The thread counts pools are built with: `0` resolved to the schedulable CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResolvedThreads {
    /// Inter-op pool size.
    pub inter_op: usize,
    /// Intra-op pool size.
    pub intra_op: usize,
}

impl RuntimeConfig {
    /// Defaults, then the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_env_with(read_process_env)
    }

    /// Defaults, then the environment as `lookup` reports it (`None` = unset).
    ///
    /// ```
    /// use enginetop::config::RuntimeConfig;
    ///
    /// let err = RuntimeConfig::from_env_with(|name| {
    ///     (name == "ENGINETOP_SPIN").then(|| "maybe".to_string())
    /// })
    /// .unwrap_err();
    /// assert!(err.to_string().starts_with("ENGINETOP_SPIN=\"maybe\" is not a switch"));
    /// ```
    pub fn from_env_with(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::load_with(lookup, &ConfigOverrides::default())
    }

    /// Defaults, then the process environment, then `overrides`.
    pub fn load(overrides: &ConfigOverrides) -> Result<Self, ConfigError> {
        Self::load_with(read_process_env, overrides)
    }

    /// Defaults, then the environment as `lookup` reports it, then `overrides`.
    pub fn load_with(
        lookup: impl Fn(&str) -> Option<String>,
        overrides: &ConfigOverrides,
    ) -> Result<Self, ConfigError> {
        let env_var = |name: &'static str| read_set(&lookup, name);
        let mut config = Self::default();
        // max_threads first: the thread counts are checked against it.
        config.max_threads = layer(
            config.max_threads,
            &env_var,
            &[env::ENGINETOP_MAX_THREADS],
            parse_max_threads,
            overrides.max_threads,
            |value| check_max_threads(Origin::Flag(flag::MAX_THREADS), value),
        )?;
        let max = config.max_threads;
        config.inter_op_threads = layer_thread_count(
            config.inter_op_threads,
            &env_var,
            [env::TF_NUM_INTEROP_THREADS, env::ENGINETOP_INTER_OP_THREADS],
            (overrides.inter_op_threads, flag::INTER_OP_THREADS),
            max,
        )?;
        config.intra_op_threads = layer_thread_count(
            config.intra_op_threads,
            &env_var,
            [env::TF_NUM_INTRAOP_THREADS, env::ENGINETOP_INTRA_OP_THREADS],
            (overrides.intra_op_threads, flag::INTRA_OP_THREADS),
            max,
        )?;
        config.pool_kind = layer(
            config.pool_kind,
            &env_var,
            &[env::ENGINETOP_POOL],
            parse_pool_kind,
            overrides.pool_kind,
            Ok,
        )?;
        config.load_engine_settings(&env_var, overrides)?;
        config.gpus = layer(
            config.gpus,
            &env_var,
            &[env::ENGINETOP_GPUS],
            parse_gpus,
            overrides.gpus,
            Ok,
        )?;
        config.gpu_sync = layer(
            config.gpu_sync,
            &env_var,
            &[env::ENGINETOP_GPU_SYNC],
            parse_gpu_sync,
            overrides.gpu_sync,
            Ok,
        )?;
        config.allow_spinning = layer(
            config.allow_spinning,
            &env_var,
            &[env::ENGINETOP_SPIN],
            parse_switch,
            overrides.allow_spinning,
            Ok,
        )?;
        Ok(config)
    }

    /// Checks a config built or edited by hand; errors name the field.
    ///
    /// ```
    /// use enginetop::config::RuntimeConfig;
    ///
    /// let mut config = RuntimeConfig::default();
    /// config.intra_op_threads = 1_000_000;
    /// assert!(config.validate().unwrap_err().to_string().contains("intra_op_threads"));
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        let max = check_max_threads(Origin::Field("max_threads"), self.max_threads)?;
        check_thread_count(
            Origin::Field("inter_op_threads"),
            self.inter_op_threads,
            max,
        )?;
        check_thread_count(
            Origin::Field("intra_op_threads"),
            self.intra_op_threads,
            max,
        )?;
        let engine_counts = [
            ("cpu_workers", self.cpu_workers),
            ("cpu_priority_workers", self.cpu_priority_workers),
            ("gpu_workers", self.gpu_workers),
            ("gpu_copy_workers", self.gpu_copy_workers),
        ];
        for (field, count) in engine_counts {
            check_thread_count(Origin::Field(field), count, max)?;
        }
        Ok(())
    }

    /// The thread counts pools are built with (`0` = the schedulable CPUs, at most
    /// `max_threads`).
    ///
    /// ```
    /// use enginetop::config::RuntimeConfig;
    ///
    /// let config = RuntimeConfig { inter_op_threads: 2, schedulable_cpus: 8, ..Default::default() };
    /// let threads = config.resolved();
    /// assert_eq!((threads.inter_op, threads.intra_op), (2, 8));
    /// ```
    pub fn resolved(&self) -> ResolvedThreads {
        ResolvedThreads {
            inter_op: self.effective_inter_op_threads(),
            intra_op: self.effective_intra_op_threads(),
        }
    }

    /// The inter-op pool size, `0` resolved.
    pub fn effective_inter_op_threads(&self) -> usize {
        self.resolve_count(self.inter_op_threads)
    }

    /// The intra-op pool size, `0` resolved.
    pub fn effective_intra_op_threads(&self) -> usize {
        self.resolve_count(self.intra_op_threads)
    }

    /// The engine's settings: MXNet's variables, ours, then the flags.
    fn load_engine_settings(
        &mut self,
        env_var: &impl Fn(&'static str) -> Option<String>,
        overrides: &ConfigOverrides,
    ) -> Result<(), ConfigError> {
        let max = self.max_threads;
        self.engine_kind = layer(
            self.engine_kind,
            env_var,
            &[env::MXNET_ENGINE_TYPE, env::ENGINETOP_ENGINE],
            parse_engine_kind,
            overrides.engine_kind,
            Ok,
        )?;
        let counts = [
            (
                &mut self.cpu_workers,
                [env::MXNET_CPU_WORKER_NTHREADS, env::ENGINETOP_CPU_WORKERS],
                (overrides.cpu_workers, flag::CPU_WORKERS),
            ),
            (
                &mut self.cpu_priority_workers,
                [
                    env::MXNET_CPU_PRIORITY_NTHREADS,
                    env::ENGINETOP_CPU_PRIORITY_WORKERS,
                ],
                (overrides.cpu_priority_workers, flag::CPU_PRIORITY_WORKERS),
            ),
            (
                &mut self.gpu_workers,
                [env::MXNET_GPU_WORKER_NTHREADS, env::ENGINETOP_GPU_WORKERS],
                (overrides.gpu_workers, flag::GPU_WORKERS),
            ),
            (
                &mut self.gpu_copy_workers,
                [
                    env::MXNET_GPU_COPY_NTHREADS,
                    env::ENGINETOP_GPU_COPY_WORKERS,
                ],
                (overrides.gpu_copy_workers, flag::GPU_COPY_WORKERS),
            ),
        ];
        for (field, names, flag_value) in counts {
            *field = layer_thread_count(*field, env_var, names, flag_value, max)?;
        }
        Ok(())
    }

    /// The engine's worker counts: CPU workers `0` = the schedulable CPUs (at most
    /// `max_threads`), the others `0` = MXNet's defaults (4 priority, 2 GPU, 2 GPU copy).
    ///
    /// ```
    /// use enginetop::config::RuntimeConfig;
    ///
    /// let config = RuntimeConfig { cpu_workers: 3, schedulable_cpus: 8, ..Default::default() };
    /// let workers = config.resolved_engine_workers();
    /// assert_eq!((workers.cpu, workers.cpu_priority, workers.gpu_copy), (3, 4, 2));
    /// ```
    pub fn resolved_engine_workers(&self) -> ResolvedEngineWorkers {
        let or_default = |count: usize, default: usize| if count == 0 { default } else { count };
        ResolvedEngineWorkers {
            cpu: self.resolve_count(self.cpu_workers),
            cpu_priority: or_default(self.cpu_priority_workers, DEFAULT_CPU_PRIORITY_WORKERS),
            gpu: or_default(self.gpu_workers, DEFAULT_GPU_WORKERS),
            gpu_copy: or_default(self.gpu_copy_workers, DEFAULT_GPU_WORKERS),
        }
    }

    fn resolve_count(&self, count: usize) -> usize {
        match count {
            0 => self.schedulable_cpus.min(self.max_threads).max(1),
            n => n,
        }
    }

    /// What is legal but probably unwise; the binary prints these at start-up.
    ///
    /// ```
    /// use enginetop::config::{ConfigWarning, RuntimeConfig};
    ///
    /// let config = RuntimeConfig {
    ///     inter_op_threads: 4,
    ///     intra_op_threads: 4,
    ///     schedulable_cpus: 8,
    ///     ..Default::default()
    /// };
    /// assert!(matches!(config.warnings()[..], [ConfigWarning::Oversubscribed { .. }]));
    /// ```
    pub fn warnings(&self) -> Vec<ConfigWarning> {
        let threads = self.resolved();
        let cpus = self.schedulable_cpus.max(1);
        let mut warnings = Vec::new();
        if threads.inter_op.saturating_mul(threads.intra_op) > cpus {
            warnings.push(ConfigWarning::Oversubscribed {
                inter_op_threads: threads.inter_op,
                intra_op_threads: threads.intra_op,
                cpus,
            });
        }
        warnings
    }
}

/// Resolves one setting: `default`, then each of `names` that is set (later names win), then
/// `flag_value` (checked by `check_flag`). Every set variable is parsed, even a shadowed one.
fn layer<T>(
    default: T,
    lookup: &impl Fn(&'static str) -> Option<String>,
    names: &[&'static str],
    parse_env: impl Fn(Origin, &str) -> Result<T, ConfigError>,
    flag_value: Option<T>,
    check_flag: impl Fn(T) -> Result<T, ConfigError>,
) -> Result<T, ConfigError> {
    let mut value = default;
    for &name in names {
        if let Some(text) = lookup(name) {
            value = parse_env(Origin::Env(name), &text)?;
        }
    }
    match flag_value {
        Some(explicit) => check_flag(explicit),
        None => Ok(value),
    }
}

/// [`layer`] for a thread count: TensorFlow's variable, then ours, then the flag, each checked
/// against `max`.
fn layer_thread_count(
    default: usize,
    lookup: &impl Fn(&'static str) -> Option<String>,
    [tf_name, our_name]: [&'static str; 2],
    (flag_value, flag_name): (Option<usize>, &'static str),
    max: usize,
) -> Result<usize, ConfigError> {
    layer(
        default,
        lookup,
        &[tf_name, our_name],
        |origin, text| parse_thread_count(origin, text, max),
        flag_value,
        |value| check_thread_count(Origin::Flag(flag_name), value, max),
    )
}

/// Reads `name` from the process environment; a non-UTF-8 value comes back lossily converted
/// so it fails to parse with a message instead of being ignored.
fn read_process_env(name: &str) -> Option<String> {
    std::env::var_os(name).map(|value| value.to_string_lossy().into_owned())
}

/// `lookup(name)`, with an empty or blank value treated as unset.
fn read_set(lookup: &impl Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    lookup(name).filter(|value| !value.trim().is_empty())
}

fn parse_thread_count(setting: Origin, text: &str, max: usize) -> Result<usize, ConfigError> {
    let digits = text.trim();
    match digits.parse::<usize>() {
        Ok(count) if count <= max => Ok(count),
        Err(err) if *err.kind() != std::num::IntErrorKind::PosOverflow => {
            Err(ConfigError::NotAThreadCount {
                setting,
                value: text.to_string(),
            })
        }
        _ => Err(ConfigError::TooManyThreads {
            setting,
            value: digits.to_string(),
            max,
        }),
    }
}

fn check_thread_count(setting: Origin, count: usize, max: usize) -> Result<usize, ConfigError> {
    parse_thread_count(setting, &count.to_string(), max)
}

fn parse_max_threads(setting: Origin, text: &str) -> Result<usize, ConfigError> {
    match text.trim().parse::<usize>() {
        Ok(max) if (1..=HARD_MAX_THREADS).contains(&max) => Ok(max),
        _ => Err(ConfigError::BadMaxThreads {
            setting,
            value: text.to_string(),
        }),
    }
}

fn check_max_threads(setting: Origin, max: usize) -> Result<usize, ConfigError> {
    parse_max_threads(setting, &max.to_string())
}

fn parse_pool_kind(setting: Origin, text: &str) -> Result<PoolKind, ConfigError> {
    PoolKind::from_str(text).map_err(|_| ConfigError::UnknownPoolKind {
        setting,
        value: text.to_string(),
    })
}

fn parse_engine_kind(setting: Origin, text: &str) -> Result<EngineKind, ConfigError> {
    EngineKind::from_str(text).map_err(|_| ConfigError::UnknownEngineKind {
        setting,
        value: text.to_string(),
    })
}

fn parse_gpus(setting: Origin, text: &str) -> Result<GpuSelection, ConfigError> {
    GpuSelection::from_str(text).map_err(|err| ConfigError::NotAGpuSelection {
        setting,
        value: text.to_string(),
        problem: err.problem,
    })
}

fn parse_gpu_sync(setting: Origin, text: &str) -> Result<GpuSyncMode, ConfigError> {
    GpuSyncMode::from_str(text).map_err(|_| ConfigError::UnknownGpuSync {
        setting,
        value: text.to_string(),
    })
}

fn parse_switch(setting: Origin, text: &str) -> Result<bool, ConfigError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "on" | "yes" => Ok(true),
        "false" | "0" | "off" | "no" => Ok(false),
        _ => Err(ConfigError::NotASwitch {
            setting,
            value: text.to_string(),
        }),
    }
}

/// Where a bad value came from, so the message can say what to change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// An environment variable (its name).
    Env(&'static str),
    /// A command-line flag (with its dashes).
    Flag(&'static str),
    /// A [`RuntimeConfig`] field set in code.
    Field(&'static str),
}

impl Origin {
    /// How the user wrote it: `NAME="value"`, `--flag value`, `field = value`.
    fn assignment(&self, value: &str) -> String {
        match self {
            Origin::Env(name) => format!("{name}={value:?}"),
            Origin::Flag(flag) => format!("{flag} {value}"),
            Origin::Field(field) => format!("{field} = {value}"),
        }
    }

    /// How to fix it, with `example` as the good value.
    fn fix(&self, example: &str) -> String {
        match self {
            Origin::Env(name) => format!("unset it or set e.g. {name}={example}"),
            Origin::Flag(flag) => format!("pass e.g. {flag} {example}"),
            Origin::Field(field) => format!("set e.g. {field} = {example}"),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Env(name) | Origin::Flag(name) | Origin::Field(name) => f.write_str(name),
        }
    }
}

/// A setting that cannot be used. The message names the variable or flag, the value, what is
/// expected and the fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Not a whole number >= 0.
    #[error(
        "{} is not a thread count: expected a whole number >= 0 (0 = one per CPU); {}",
        .setting.assignment(.value), .setting.fix("4")
    )]
    NotAThreadCount {
        /// The variable, flag or field.
        setting: Origin,
        /// What it held.
        value: String,
    },
    /// More threads than `max_threads` allows.
    #[error(
        "{} is too many threads: expected at most max_threads = {max}; {}, \
         or raise the limit with {} or {} (up to {})",
        .setting.assignment(.value), .setting.fix(&.max.min(&4).to_string()),
        env::ENGINETOP_MAX_THREADS, flag::MAX_THREADS, HARD_MAX_THREADS
    )]
    TooManyThreads {
        /// The variable, flag or field.
        setting: Origin,
        /// What it held.
        value: String,
        /// The `max_threads` in force.
        max: usize,
    },
    /// `max_threads` outside `1..=HARD_MAX_THREADS`.
    #[error(
        "{} is not a usable thread limit: expected a whole number from 1 to {}; {}",
        .setting.assignment(.value), HARD_MAX_THREADS, .setting.fix("256")
    )]
    BadMaxThreads {
        /// The variable, flag or field.
        setting: Origin,
        /// What it held.
        value: String,
    },
    /// Not one of our engines, nor one of MXNet's names for them.
    #[error(
        "{} is not an engine: expected one of naive, pooled, per-device (or MXNet's \
         NaiveEngine, ThreadedEngine, ThreadedEnginePerDevice; for the *Async variants use \
         per-device, whose GPU ops wait on events unless ENGINETOP_GPU_SYNC=sync); {}",
        .setting.assignment(.value), .setting.fix("per-device")
    )]
    UnknownEngineKind {
        /// The variable, flag or field.
        setting: Origin,
        /// What it held.
        value: String,
    },
    /// Not one of our pool kinds.
    #[error(
        "{} is not a pool kind: expected one of simple, eigen, chase-lev; {}",
        .setting.assignment(.value), .setting.fix("eigen")
    )]
    UnknownPoolKind {
        /// The variable, flag or field.
        setting: Origin,
        /// What it held.
        value: String,
    },
    /// Not one of `none`, `auto`, `cuda`, `sim:N`.
    #[error(
        "{} is not a GPU selection: {}; {}",
        .setting.assignment(.value), discover::expected(.problem), .setting.fix("sim:1")
    )]
    NotAGpuSelection {
        /// The variable, flag or field.
        setting: Origin,
        /// What it held.
        value: String,
        /// What is wrong with it.
        problem: String,
    },
    /// Not `event` or `sync`.
    #[error(
        "{} is not a GPU sync mode: expected event (dependencies on events) or sync (a host sync \
         after every op); {}",
        .setting.assignment(.value), .setting.fix("event")
    )]
    UnknownGpuSync {
        /// The variable, flag or field.
        setting: Origin,
        /// What it held.
        value: String,
    },
    /// Not a boolean.
    #[error(
        "{} is not a switch: expected true/false, 1/0, on/off or yes/no; {}",
        .setting.assignment(.value), .setting.fix("false")
    )]
    NotASwitch {
        /// The variable, flag or field.
        setting: Origin,
        /// What it held.
        value: String,
    },
}

/// A legal but probably unwise configuration. Displays as a sentence with the numbers and a
/// suggestion.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigWarning {
    /// `inter_op_threads x intra_op_threads` exceeds the schedulable CPUs: ops running at once
    /// each fanning out over the intra-op threads compete for cores.
    Oversubscribed {
        /// Resolved inter-op threads.
        inter_op_threads: usize,
        /// Resolved intra-op threads.
        intra_op_threads: usize,
        /// Schedulable CPUs.
        cpus: usize,
    },
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ConfigWarning::Oversubscribed {
                inter_op_threads: inter,
                intra_op_threads: intra,
                cpus,
            } => {
                write!(
                    f,
                    "{inter} inter-op x {intra} intra-op threads = {} threads may want a CPU \
                     at once, but only {cpus} are schedulable; ",
                    inter.saturating_mul(intra)
                )?;
                write_oversubscription_fix(f, inter, cpus)
            }
        }
    }
}

/// Suggests counts whose product fits in `cpus`: shrink intra-op if inter-op alone fits,
/// otherwise both.
fn write_oversubscription_fix(
    f: &mut fmt::Formatter<'_>,
    inter: usize,
    cpus: usize,
) -> fmt::Result {
    if inter <= cpus {
        let intra = (cpus / inter.max(1)).max(1);
        write!(
            f,
            "lower the intra-op count, e.g. {} {intra} (or {}={intra})",
            flag::INTRA_OP_THREADS,
            env::ENGINETOP_INTRA_OP_THREADS
        )
    } else {
        write!(
            f,
            "lower both, e.g. {} {cpus} {} 1",
            flag::INTER_OP_THREADS,
            flag::INTRA_OP_THREADS
        )
    }
}

#[cfg(test)]
mod tests {
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
            "TF_NUM_INTRAOP_THREADS=\"lots\" is not a thread count: expected a whole number \
             >= 0 (0 = one per CPU); unset it or set e.g. TF_NUM_INTRAOP_THREADS=4"
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
        assert_eq!(
            oversubscription(0, 0, 2).len(),
            1,
            "TF's defaults: 2 x 2 on two CPUs"
        );
        assert_eq!(oversubscription(0, 1, 2), [], "0 resolves to 2; 2 x 1 fits");
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
    }
}
