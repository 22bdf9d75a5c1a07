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
//!    ours winning again; the GPUs from `ENGINETOP_GPUS` and `ENGINETOP_GPU_SYNC`;
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
//! A workload run's inter-op threads are its engine's CPU workers, so MXNet's
//! `MXNET_CPU_WORKER_NTHREADS` (or `ENGINETOP_CPU_WORKERS`) sizes them when no inter-op count is
//! set, and the other way round; set both to different counts and the inter-op count wins,
//! with a warning. The naive engine has no workers (it runs every op on the pushing thread),
//! so its inter-op count is 1, and a count set for it warns that it is unused. The priority
//! and GPU pools' `0` means MXNet's defaults (4, 2 and 2).
//! [`RuntimeConfig::warnings`] reports when counts you set make `inter x intra` exceed the
//! CPUs. TensorFlow's own defaults (both `0`) do that on any machine with more than one CPU,
//! and so do ours; the defaults are not warned about (the dashboard's lint shows them).
//!
//! # Files
//! This file holds [`RuntimeConfig`] and its layering; `choices.rs` the values settings choose
//! among ([`PoolKind`], [`EngineKind`], [`GpuSelection`], [`GpuSyncMode`]), which the pool, the
//! engine and the devices re-export, so that this module imports none of them; `names.rs` the
//! variable and flag names ([`env`](mod@env), [`flag`]), `parse.rs` the value parsers,
//! `error.rs` [`ConfigError`] and [`ConfigWarning`].
//!
//! # Adding a setting
//! Add the field to [`RuntimeConfig`] (and its default), an `Option` to [`ConfigOverrides`], the
//! variable to [`env`](mod@env) and the flag to [`flag`], and one `layer` call in
//! [`RuntimeConfig::load_with`] with a parser that returns a [`ConfigError`].
#![forbid(unsafe_code)]

use std::fmt;
use std::str::FromStr;

mod choices;
mod error;
mod names;
mod parse;
#[cfg(test)]
mod tests;

pub use choices::{
    BadGpuSyncMode, EngineKind, GpuSelection, GpuSelectionError, GpuSyncMode, PoolKind,
    UnknownEngineKind, UnknownPoolKind, DEFAULT_MAX_THREADS, MAX_SIM_GPUS,
};
pub use error::{ConfigError, ConfigWarning, Origin};
pub use names::{env, flag};
use parse::*;

/// `--spin`'s value: `true`/`false`, `1`/`0`, `on`/`off`, `yes`/`no`, any case (as
/// `ENGINETOP_SPIN`), or the error naming the flag and the spellings.
pub fn parse_spin_flag(text: &str) -> Result<bool, String> {
    parse::parse_switch(Origin::Flag(flag::SPIN), text).map_err(|err| err.to_string())
}

/// `--gpu-sync`'s value: `event` or `sync` (as `ENGINETOP_GPU_SYNC`), or the error naming the
/// flag and the choices.
pub fn parse_gpu_sync_flag(text: &str) -> Result<GpuSyncMode, String> {
    parse::parse_gpu_sync(Origin::Flag(flag::GPU_SYNC), text).map_err(|err| err.to_string())
}

/// The largest `max_threads` we accept: pools allocate a slot per possible worker up front.
pub const HARD_MAX_THREADS: usize = 4096;

/// `count`, or `fallback` where `count` is `0` (unset).
fn first_set(count: usize, fallback: usize) -> usize {
    if count == 0 {
        fallback
    } else {
        count
    }
}

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
pub(crate) const DEFAULT_CPU_PRIORITY_WORKERS: usize = 4;
/// MXNet's default GPU compute and copy workers per GPU.
pub(crate) const DEFAULT_GPU_WORKERS: usize = 2;

/// What `0` picks, per thread count, for messages (a test keeps them on the constants).
const ZERO_IS_PER_CPU: &str = "one per CPU";
const ZERO_IS_PRIORITY_DEFAULT: &str = "MXNet's default, 4";
const ZERO_IS_GPU_DEFAULT: &str = "MXNet's default, 2";

/// The range of a thread count under `max` whose `0` means `zero_means`.
fn count_range(max: usize, zero_means: &'static str) -> CountRange {
    CountRange { max, zero_means }
}

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
            count_range(max, ZERO_IS_PER_CPU),
        )?;
        config.intra_op_threads = layer_thread_count(
            config.intra_op_threads,
            &env_var,
            [env::TF_NUM_INTRAOP_THREADS, env::ENGINETOP_INTRA_OP_THREADS],
            (overrides.intra_op_threads, flag::INTRA_OP_THREADS),
            count_range(max, ZERO_IS_PER_CPU),
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
        let counts = [
            ("inter_op_threads", self.inter_op_threads, ZERO_IS_PER_CPU),
            ("intra_op_threads", self.intra_op_threads, ZERO_IS_PER_CPU),
            ("cpu_workers", self.cpu_workers, ZERO_IS_PER_CPU),
            (
                "cpu_priority_workers",
                self.cpu_priority_workers,
                ZERO_IS_PRIORITY_DEFAULT,
            ),
            ("gpu_workers", self.gpu_workers, ZERO_IS_GPU_DEFAULT),
            (
                "gpu_copy_workers",
                self.gpu_copy_workers,
                ZERO_IS_GPU_DEFAULT,
            ),
        ];
        for (field, count, zero_means) in counts {
            check_thread_count(Origin::Field(field), count, count_range(max, zero_means))?;
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

    /// The most threads a run keeps busy with kernels at once: `inter x intra`, at most the
    /// schedulable CPUs. A run's GFLOP/s is compared with the GEMM peak on this many threads
    /// (two ops on one intra-op thread each use two cores, as one op on two threads does).
    ///
    /// ```
    /// use enginetop::config::RuntimeConfig;
    ///
    /// let config = |inter, intra| RuntimeConfig {
    ///     inter_op_threads: inter,
    ///     intra_op_threads: intra,
    ///     schedulable_cpus: 4,
    ///     ..Default::default()
    /// };
    /// assert_eq!(config(2, 1).kernel_threads(), 2);
    /// assert_eq!(config(1, 3).kernel_threads(), 3);
    /// assert_eq!(config(0, 0).kernel_threads(), 4, "4 x 4 wants 16, 4 CPUs run them");
    /// ```
    pub fn kernel_threads(&self) -> usize {
        let threads = self.resolved();
        let cpus = self.schedulable_cpus.max(1);
        threads.inter_op.saturating_mul(threads.intra_op).min(cpus)
    }

    /// The inter-op pool size, `0` resolved. Unset, it is the engine's CPU worker count when
    /// that is set: in a workload run the two name the same threads (see
    /// [`RuntimeConfig::warnings`] for when both are set). The naive engine has no workers:
    /// it runs every op on the thread that pushes it, one at a time, so its figure is 1.
    pub fn effective_inter_op_threads(&self) -> usize {
        if self.engine_kind == EngineKind::Naive {
            return 1;
        }
        self.resolve_count(first_set(self.inter_op_threads, self.cpu_workers))
    }

    /// The intra-op pool size, `0` resolved.
    pub(crate) fn effective_intra_op_threads(&self) -> usize {
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
                ZERO_IS_PER_CPU,
            ),
            (
                &mut self.cpu_priority_workers,
                [
                    env::MXNET_CPU_PRIORITY_NTHREADS,
                    env::ENGINETOP_CPU_PRIORITY_WORKERS,
                ],
                (overrides.cpu_priority_workers, flag::CPU_PRIORITY_WORKERS),
                ZERO_IS_PRIORITY_DEFAULT,
            ),
            (
                &mut self.gpu_workers,
                [env::MXNET_GPU_WORKER_NTHREADS, env::ENGINETOP_GPU_WORKERS],
                (overrides.gpu_workers, flag::GPU_WORKERS),
                ZERO_IS_GPU_DEFAULT,
            ),
            (
                &mut self.gpu_copy_workers,
                [
                    env::MXNET_GPU_COPY_NTHREADS,
                    env::ENGINETOP_GPU_COPY_WORKERS,
                ],
                (overrides.gpu_copy_workers, flag::GPU_COPY_WORKERS),
                ZERO_IS_GPU_DEFAULT,
            ),
        ];
        for (field, names, flag_value, zero_means) in counts {
            let range = count_range(max, zero_means);
            *field = layer_thread_count(*field, env_var, names, flag_value, range)?;
        }
        Ok(())
    }

    /// The engine's worker counts: CPU workers are the inter-op threads
    /// ([`RuntimeConfig::effective_inter_op_threads`]: the inter-op count, else the CPU worker
    /// count, else the schedulable CPUs, at most `max_threads`), the others `0` = MXNet's defaults (4 priority, 2 GPU, 2 GPU copy).
    ///
    /// ```
    /// use enginetop::config::RuntimeConfig;
    ///
    /// let config = RuntimeConfig { cpu_workers: 3, schedulable_cpus: 8, ..Default::default() };
    /// let workers = config.resolved_engine_workers();
    /// assert_eq!((workers.cpu, workers.cpu_priority, workers.gpu_copy), (3, 4, 2));
    /// ```
    pub fn resolved_engine_workers(&self) -> ResolvedEngineWorkers {
        ResolvedEngineWorkers {
            cpu: self.effective_inter_op_threads(),
            // The default fits under max_threads, which bounds every pool (a set count was
            // checked against it already).
            cpu_priority: first_set(
                self.cpu_priority_workers,
                DEFAULT_CPU_PRIORITY_WORKERS.min(self.max_threads),
            ),
            gpu: first_set(self.gpu_workers, DEFAULT_GPU_WORKERS),
            gpu_copy: first_set(self.gpu_copy_workers, DEFAULT_GPU_WORKERS),
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
    /// Oversubscription is only reported for counts the user set (by flag, environment or
    /// file): the defaults (inter = intra = the schedulable CPUs, as TensorFlow's) oversubscribe
    /// by design, and a warning on every default run would teach users to ignore warnings.
    /// The dashboard's lints still point it out, with the live counts.
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
        if self.sets_a_thread_count() && threads.inter_op.saturating_mul(threads.intra_op) > cpus {
            warnings.push(ConfigWarning::Oversubscribed {
                inter_op_threads: threads.inter_op,
                intra_op_threads: threads.intra_op,
                cpus,
            });
        }
        let (inter, cpu_workers) = (self.inter_op_threads, self.cpu_workers);
        if self.engine_kind == EngineKind::Naive {
            // Neither count is used, so which one wins does not matter.
            let inter_set = first_set(inter, cpu_workers);
            if inter_set > 1 {
                warnings.push(ConfigWarning::InterOpUnusedByNaive { inter: inter_set });
            }
        } else if inter != 0 && cpu_workers != 0 && inter != cpu_workers {
            warnings.push(ConfigWarning::InterOpDiffersFromCpuWorkers { inter, cpu_workers });
        }
        warnings
    }

    /// Whether the inter-op, intra-op or engine CPU worker count was set rather than left to
    /// its default.
    fn sets_a_thread_count(&self) -> bool {
        self.inter_op_threads != 0 || self.intra_op_threads != 0 || self.cpu_workers != 0
    }
}
