//! The runtime's choices a configuration names: the pool kind, the engine kind, which GPUs
//! and how GPU ops keep their dependencies, and the default thread ceiling.
//!
//! They are plain values with their user-facing names (`Display`) and the spellings each
//! accepts (`FromStr`, ours and TensorFlow's or MXNet's, derived by strum; the errors name
//! the accepted spellings). They live here, at the bottom, so
//! that `config` imports no runtime module; the pool, the engine and the devices re-export the
//! one each runs on, under the paths users know (`pool::PoolKind`, `engine::EngineKind`, ...).
#![forbid(unsafe_code)]

use std::fmt;
use std::str::FromStr;

/// Default ceiling for live resizes.
pub const DEFAULT_MAX_THREADS: usize = 128;

/// The pool implementations, chosen by name (`--pool simple|eigen|chase-lev`).
///
/// ```
/// use enginetop::pool::PoolKind;
/// assert_eq!("Non-Blocking".parse::<PoolKind>().unwrap(), PoolKind::Eigen);
/// assert_eq!(PoolKind::ChaseLev.to_string(), "chase-lev");
/// let err = "rayon".parse::<PoolKind>().unwrap_err().to_string();
/// assert!(err.contains("use one of simple, eigen, chase-lev"), "{err}");
/// ```
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "kebab-case")]
#[strum(
    ascii_case_insensitive,
    parse_err_ty = UnknownPoolKind,
    parse_err_fn = UnknownPoolKind::of
)]
pub enum PoolKind {
    /// Work-sharing: one locked deque, LIFO stack of parked waiters.
    #[strum(to_string = "simple")]
    Simple,
    /// Eigen's NonBlockingThreadPool: per-worker RunQueue, work stealing.
    #[strum(
        to_string = "eigen",
        serialize = "non-blocking",
        serialize = "nonblocking"
    )]
    Eigen,
    /// The same worker loop over crossbeam's Chase-Lev deques.
    #[strum(
        to_string = "chase-lev",
        serialize = "chaselev",
        serialize = "crossbeam"
    )]
    ChaseLev,
}

impl PoolKind {
    /// Every kind, in the order benchmarks and docs list them.
    pub const ALL: [PoolKind; 3] = [PoolKind::Simple, PoolKind::Eigen, PoolKind::ChaseLev];

    /// The name users type.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The three engines (`--engine`, `ENGINETOP_ENGINE`, `MXNET_ENGINE_TYPE`): ours (`naive`,
/// `pooled`, `per-device`) or MXNet's (`NaiveEngine`, `ThreadedEngine`,
/// `ThreadedEnginePooled`, `ThreadedEnginePerDevice`), in any case.
///
/// ```
/// use enginetop::engine::EngineKind;
/// assert_eq!("ThreadedEnginePerDevice".parse::<EngineKind>().unwrap(), EngineKind::PerDevice);
/// assert_eq!(EngineKind::Pooled.to_string(), "pooled");
/// ```
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "kebab-case")]
#[strum(
    ascii_case_insensitive,
    parse_err_ty = UnknownEngineKind,
    parse_err_fn = UnknownEngineKind::of
)]
pub enum EngineKind {
    /// Runs each op on the pushing thread at push (MXNet's `NaiveEngine`): for debugging.
    #[strum(to_string = "naive", serialize = "NaiveEngine")]
    Naive,
    /// Shared workers plus one IO worker for copies (MXNet's `ThreadedEngine`).
    #[strum(
        to_string = "pooled",
        serialize = "threaded",
        serialize = "ThreadedEngine",
        serialize = "ThreadedEnginePooled"
    )]
    Pooled,
    /// A worker pool per device plus a CPU priority pool (MXNet's `ThreadedEnginePerDevice`).
    #[default]
    #[strum(
        to_string = "per-device",
        serialize = "perdevice",
        serialize = "per_device",
        serialize = "ThreadedEnginePerDevice"
    )]
    PerDevice,
}

impl EngineKind {
    /// Every kind, in the order benchmarks list them.
    pub const ALL: [EngineKind; 3] = [EngineKind::Naive, EngineKind::Pooled, EngineKind::PerDevice];

    /// The name users type.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// MXNet's name for this engine (`MXNET_ENGINE_TYPE`).
    pub fn mxnet_name(self) -> &'static str {
        match self {
            EngineKind::Naive => "NaiveEngine",
            EngineKind::Pooled => "ThreadedEngine",
            EngineKind::PerDevice => "ThreadedEnginePerDevice",
        }
    }
}

/// A pool kind name that is not one of ours.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown pool kind `{}`: use one of simple, eigen, chase-lev",
    crate::error_chain::Cut(.0)
)]
pub struct UnknownPoolKind(pub String);

impl UnknownPoolKind {
    /// The error for `name`.
    fn of(name: &str) -> Self {
        UnknownPoolKind(name.to_string())
    }
}

/// An engine name that is not one of ours or MXNet's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown engine `{}`: use one of naive, pooled, per-device (or MXNet's NaiveEngine, \
     ThreadedEngine, ThreadedEnginePerDevice; for the *Async variants use per-device, whose \
     GPU ops wait on events unless ENGINETOP_GPU_SYNC=sync)",
    crate::error_chain::Cut(.0)
)]
pub struct UnknownEngineKind(pub String);

impl UnknownEngineKind {
    /// The error for `name`.
    fn of(name: &str) -> Self {
        UnknownEngineKind(name.to_string())
    }
}

/// How dependencies between GPU ops are kept (the protocol: `src/engine/gpu/mod.rs`):
/// `event` (also `events`, `async`) or `sync` (also `op`, `per-op`), in any case.
///
/// ```
/// use enginetop::engine::GpuSyncMode;
/// assert_eq!("Events".parse::<GpuSyncMode>().unwrap(), GpuSyncMode::Event);
/// assert_eq!("per-op".parse::<GpuSyncMode>().unwrap(), GpuSyncMode::PerOp);
/// assert!("never".parse::<GpuSyncMode>().is_err());
/// ```
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(
    ascii_case_insensitive,
    parse_err_ty = BadGpuSyncMode,
    parse_err_fn = BadGpuSyncMode::of
)]
pub enum GpuSyncMode {
    /// Ops complete at launch; dependents wait on events (device) or fences (host).
    #[default]
    #[strum(to_string = "event", serialize = "events", serialize = "async")]
    Event,
    /// The worker synchronizes its stream after every op (MXNet without `Async`).
    #[serde(rename = "sync")]
    #[strum(
        to_string = "sync",
        serialize = "op",
        serialize = "per-op",
        serialize = "per_op"
    )]
    PerOp,
}

impl GpuSyncMode {
    /// `event` or `sync`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A GPU sync mode name that is not one of ours.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a GPU sync mode: use event (dependencies on events) or sync (a host sync \
     after every op)"
)]
pub struct BadGpuSyncMode(pub String);

impl BadGpuSyncMode {
    /// The error for `text`.
    fn of(text: &str) -> Self {
        BadGpuSyncMode(text.to_string())
    }
}

/// The most simulated GPUs `sim:N` may ask for.
pub const MAX_SIM_GPUS: u32 = 16;

/// What `--gpus` asks for.
///
/// ```
/// use enginetop::device::discover::GpuSelection;
///
/// assert_eq!("sim:2".parse::<GpuSelection>().unwrap(), GpuSelection::Sim(2));
/// assert_eq!(" AUTO ".parse::<GpuSelection>().unwrap(), GpuSelection::Auto);
/// let err = "sim:0".parse::<GpuSelection>().unwrap_err();
/// assert!(err.to_string().contains("sim:0 asks for no GPUs: use none"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GpuSelection {
    /// No GPUs.
    None,
    /// CUDA if usable, else one simulated GPU with a notice.
    #[default]
    Auto,
    /// The real GPUs, or an error.
    Cuda,
    /// This many simulated GPUs.
    Sim(u32),
}

impl fmt::Display for GpuSelection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuSelection::None => f.write_str("none"),
            GpuSelection::Auto => f.write_str("auto"),
            GpuSelection::Cuda => f.write_str("cuda"),
            GpuSelection::Sim(count) => write!(f, "sim:{count}"),
        }
    }
}

impl serde::Serialize for GpuSelection {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A `--gpus` value that is not one of the forms. Displays as
/// `"sim:0" is not a GPU selection: expected none, auto, cuda or sim:N with N from 1 to 16
/// (sim:0 asks for no GPUs: use none)`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a GPU selection: {}", expected(.problem))]
pub struct GpuSelectionError {
    /// What was given.
    pub value: String,
    /// What is wrong with it, in a few words.
    pub problem: String,
}

/// `expected none, auto, cuda or sim:N with N from 1 to 16 (<problem>)`.
pub(crate) fn expected(problem: &str) -> String {
    format!("expected none, auto, cuda or sim:N with N from 1 to {MAX_SIM_GPUS} ({problem})")
}

impl FromStr for GpuSelection {
    type Err = GpuSelectionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = |problem: &str| GpuSelectionError {
            value: text.to_string(),
            problem: problem.to_string(),
        };
        let lowered = text.trim().to_ascii_lowercase();
        match lowered.as_str() {
            "none" => return Ok(GpuSelection::None),
            "auto" => return Ok(GpuSelection::Auto),
            "cuda" => return Ok(GpuSelection::Cuda),
            "sim" => return Err(error("sim needs a count, e.g. sim:1")),
            _ => {}
        }
        let Some(count) = lowered.strip_prefix("sim:") else {
            return Err(error("not one of these"));
        };
        match count.trim().parse::<u32>() {
            Ok(0) => Err(error("sim:0 asks for no GPUs: use none")),
            Ok(count) if count <= MAX_SIM_GPUS => Ok(GpuSelection::Sim(count)),
            Ok(_) => Err(error(&format!("at most {MAX_SIM_GPUS} simulated GPUs"))),
            Err(_) => Err(error("N must be a whole number")),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn engine_names_include_mxnets() {
        for kind in EngineKind::ALL {
            assert_eq!(kind.as_str().parse::<EngineKind>().unwrap(), kind);
            assert_eq!(kind.mxnet_name().parse::<EngineKind>().unwrap(), kind);
        }
        let message = "ThreadedEnginePerDeviceAsync"
            .parse::<EngineKind>()
            .unwrap_err()
            .to_string();
        assert!(message.contains("NaiveEngine"), "{message}");
    }

    #[test]
    fn every_form_parses_and_displays_back() {
        for (text, selection) in [
            ("none", GpuSelection::None),
            ("auto", GpuSelection::Auto),
            ("cuda", GpuSelection::Cuda),
            ("sim:1", GpuSelection::Sim(1)),
            ("sim:16", GpuSelection::Sim(16)),
        ] {
            assert_eq!(text.parse::<GpuSelection>(), Ok(selection));
            assert_eq!(selection.to_string(), text);
        }
        assert_eq!("Sim: 3".parse::<GpuSelection>(), Ok(GpuSelection::Sim(3)));
    }

    #[test]
    fn bad_forms_say_what_is_wrong_and_what_is_expected() {
        let problem = |text: &str| text.parse::<GpuSelection>().unwrap_err().problem;
        assert_eq!(problem("sim:0"), "sim:0 asks for no GPUs: use none");
        assert_eq!(problem("sim:17"), "at most 16 simulated GPUs");
        assert_eq!(problem("sim:two"), "N must be a whole number");
        assert_eq!(problem("sim:-1"), "N must be a whole number");
        assert_eq!(problem("sim"), "sim needs a count, e.g. sim:1");
        assert_eq!(problem("gpu"), "not one of these");
        assert_eq!(
            "rocm".parse::<GpuSelection>().unwrap_err().to_string(),
            "\"rocm\" is not a GPU selection: expected none, auto, cuda or sim:N with N from 1 \
             to 16 (not one of these)"
        );
    }
}
