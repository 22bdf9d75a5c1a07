//! Parsers of setting values; each failure is a [`ConfigError`] naming the setting and the fix.

use super::*;

/// Resolves one setting: `default`, then each of `names` that is set (later names win), then
/// `flag_value` (checked by `check_flag`). Every set variable is parsed, even a shadowed one.
pub(super) fn layer<T>(
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

/// The accepted range of a thread count: `0..=max`, where `0` means `zero_means`.
#[derive(Clone, Copy, Debug)]
pub(super) struct CountRange {
    /// The `max_threads` in force.
    pub(super) max: usize,
    /// What `0` picks, for messages (`one per CPU`, `MXNet's default, 4`).
    pub(super) zero_means: &'static str,
}

/// [`layer`] for a thread count: TensorFlow's variable, then ours, then the flag, each checked
/// against `range`.
pub(super) fn layer_thread_count(
    default: usize,
    lookup: &impl Fn(&'static str) -> Option<String>,
    [tf_name, our_name]: [&'static str; 2],
    (flag_value, flag_name): (Option<usize>, &'static str),
    range: CountRange,
) -> Result<usize, ConfigError> {
    layer(
        default,
        lookup,
        &[tf_name, our_name],
        |origin, text| parse_thread_count(origin, text, range),
        flag_value,
        |value| check_thread_count(Origin::Flag(flag_name), value, range),
    )
}

/// Reads `name` from the process environment; a non-UTF-8 value comes back lossily converted
/// so it fails to parse with a message instead of being ignored.
pub(super) fn read_process_env(name: &str) -> Option<String> {
    std::env::var_os(name).map(|value| value.to_string_lossy().into_owned())
}

/// `lookup(name)`, with an empty or blank value treated as unset.
pub(super) fn read_set(lookup: &impl Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    lookup(name).filter(|value| !value.trim().is_empty())
}

pub(super) fn parse_thread_count(
    setting: Origin,
    text: &str,
    CountRange { max, zero_means }: CountRange,
) -> Result<usize, ConfigError> {
    let digits = text.trim();
    match digits.parse::<usize>() {
        Ok(count) if count <= max => Ok(count),
        Err(err) if *err.kind() != std::num::IntErrorKind::PosOverflow => {
            Err(ConfigError::NotAThreadCount {
                setting,
                value: text.to_string(),
                max,
                zero_means,
            })
        }
        _ => Err(ConfigError::TooManyThreads {
            setting,
            value: digits.to_string(),
            max,
        }),
    }
}

pub(super) fn check_thread_count(
    setting: Origin,
    count: usize,
    range: CountRange,
) -> Result<usize, ConfigError> {
    parse_thread_count(setting, &count.to_string(), range)
}

pub(super) fn parse_max_threads(setting: Origin, text: &str) -> Result<usize, ConfigError> {
    match text.trim().parse::<usize>() {
        Ok(max) if (1..=HARD_MAX_THREADS).contains(&max) => Ok(max),
        _ => Err(ConfigError::BadMaxThreads {
            setting,
            value: text.to_string(),
        }),
    }
}

pub(super) fn check_max_threads(setting: Origin, max: usize) -> Result<usize, ConfigError> {
    parse_max_threads(setting, &max.to_string())
}

pub(super) fn parse_pool_kind(setting: Origin, text: &str) -> Result<PoolKind, ConfigError> {
    PoolKind::from_str(text.trim()).map_err(|_| ConfigError::UnknownPoolKind {
        setting,
        value: text.to_string(),
    })
}

pub(super) fn parse_engine_kind(setting: Origin, text: &str) -> Result<EngineKind, ConfigError> {
    EngineKind::from_str(text.trim()).map_err(|_| ConfigError::UnknownEngineKind {
        setting,
        value: text.to_string(),
    })
}

pub(super) fn parse_gpus(setting: Origin, text: &str) -> Result<GpuSelection, ConfigError> {
    GpuSelection::from_str(text).map_err(|err| ConfigError::NotAGpuSelection {
        setting,
        value: text.to_string(),
        problem: err.problem,
    })
}

pub(super) fn parse_gpu_sync(setting: Origin, text: &str) -> Result<GpuSyncMode, ConfigError> {
    GpuSyncMode::from_str(text.trim()).map_err(|_| ConfigError::UnknownGpuSync {
        setting,
        value: text.to_string(),
    })
}

pub(super) fn parse_switch(setting: Origin, text: &str) -> Result<bool, ConfigError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "on" | "yes" => Ok(true),
        "false" | "0" | "off" | "no" => Ok(false),
        _ => Err(ConfigError::NotASwitch {
            setting,
            value: text.to_string(),
        }),
    }
}
