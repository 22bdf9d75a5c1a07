//! What can be wrong with a configuration ([`ConfigError`]) and what is legal but unwise
//! ([`ConfigWarning`]).

use super::*;

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
    /// `NAME="value"`, `--flag value` or `field = value`, a long value cut
    /// ([`Cut`](crate::error_chain::Cut)).
    fn assignment(&self, value: &str) -> String {
        let value = crate::error_chain::Cut(value);
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
    /// Not a whole number from 0 to `max_threads`.
    #[error(
        "{} is not a thread count: expected a whole number from 0 to max_threads = {max} \
         (0 = {zero_means}); {}",
        .setting.assignment(.value), .setting.fix("4")
    )]
    NotAThreadCount {
        /// The variable, flag or field.
        setting: Origin,
        /// What it held.
        value: String,
        /// The `max_threads` in force.
        max: usize,
        /// What `0` picks for this setting.
        zero_means: &'static str,
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
        .setting.assignment(.value), super::choices::expected(.problem), .setting.fix("sim:1")
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
    /// The inter-op count (TensorFlow's name) and the engine's CPU worker count (MXNet's) are
    /// both set and differ. A workload run's engine workers are its inter-op threads, so the
    /// inter-op count is the one used.
    InterOpDiffersFromCpuWorkers {
        /// The inter-op count set.
        inter: usize,
        /// The CPU worker count set.
        cpu_workers: usize,
    },
    /// An inter-op (engine CPU worker) count is set, but the naive engine has no workers: it
    /// runs every op on the pushing thread.
    InterOpUnusedByNaive {
        /// The count set.
        inter: usize,
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
                write_oversubscription_fix(f, inter, intra, cpus)
            }
            ConfigWarning::InterOpDiffersFromCpuWorkers { inter, cpu_workers } => write!(
                f,
                "inter-op threads = {inter} and engine CPU workers = {cpu_workers} are both set, \
                 but they are the same threads: running {inter} (the inter-op count wins); set \
                 only one \
                 ({} / {} / {}, or {} / {})",
                flag::INTER_OP_THREADS,
                env::ENGINETOP_INTER_OP_THREADS,
                env::TF_NUM_INTEROP_THREADS,
                env::ENGINETOP_CPU_WORKERS,
                env::MXNET_CPU_WORKER_NTHREADS,
            ),
            ConfigWarning::InterOpUnusedByNaive { inter } => write!(
                f,
                "{inter} inter-op threads are set, but the naive engine has no workers: it runs \
                 every op on the thread that pushes it, one at a time; pick --engine pooled or \
                 per-device to run ops side by side"
            ),
        }
    }
}

/// Suggests counts whose product fits in `cpus`: shrink intra-op if inter-op alone fits,
/// otherwise inter-op (and intra-op to 1, unless it is 1 already).
pub(super) fn write_oversubscription_fix(
    f: &mut fmt::Formatter<'_>,
    inter: usize,
    intra: usize,
    cpus: usize,
) -> fmt::Result {
    if inter > cpus && intra <= 1 {
        return write!(
            f,
            "lower the inter-op count, e.g. {} {cpus} (or {}={cpus})",
            flag::INTER_OP_THREADS,
            env::ENGINETOP_INTER_OP_THREADS
        );
    }
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
