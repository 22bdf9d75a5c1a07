//! The engine's worker-count settings, and the one rule that checks each of them.
//!
//! Every engine answers a setting the same way, whether its pools run, are stopped, or do not
//! exist yet (the per-device engine starts a device's pool on its first op): a count is checked
//! against the range below before anything is stored or resized, so a setting that is accepted
//! is one the engine can start with. A setting an engine does not have is refused with what the
//! engine does instead, never accepted and ignored.
//!
//! | setting           | naive   | pooled  | per-device |
//! |-------------------|---------|---------|------------|
//! | `cpu_workers`     | refused | 1..=max | 1..=max    |
//! | `priority_workers`| refused | refused | 1..=max'   |
//!
//! `max` is the engine's `max_threads`; `max'` is the same, capped at the priority pool's
//! [`MAX_PRIORITY_THREADS`].
//!
//! This file sits below `error.rs` (an error names the setting it refuses), so the check that
//! returns an [`EngineError`](super::EngineError), `EngineSetting::check`, is written there.
#![forbid(unsafe_code)]

use std::fmt;

use super::EngineKind;
use crate::device::cpu::MAX_PRIORITY_THREADS;

/// A worker count an engine can be built with and resized to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EngineSetting {
    /// The CPU workers: per CPU device (per-device) or shared (pooled);
    /// [`Engine::set_cpu_workers`](super::Engine::set_cpu_workers).
    CpuWorkers,
    /// The CPU priority pool's workers (per-device);
    /// [`Engine::set_priority_workers`](super::Engine::set_priority_workers).
    PriorityWorkers,
}

impl EngineSetting {
    /// The setting's name, as the setter and [`EngineOptions`](super::EngineOptions) spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineSetting::CpuWorkers => "cpu_workers",
            EngineSetting::PriorityWorkers => "priority_workers",
        }
    }

    /// The most workers `engine` built with `max_threads` may have, or `None` when `engine`
    /// has no such workers.
    pub fn limit(self, engine: EngineKind, max_threads: usize) -> Option<usize> {
        match (self, engine) {
            (_, EngineKind::Naive) => None,
            (EngineSetting::PriorityWorkers, EngineKind::Pooled) => None,
            (EngineSetting::CpuWorkers, _) => Some(max_threads),
            (EngineSetting::PriorityWorkers, _) => Some(max_threads.min(MAX_PRIORITY_THREADS)),
        }
    }

    /// What `engine` does in place of this setting (for the refusal of one it lacks).
    pub(crate) fn instead(self, engine: EngineKind) -> &'static str {
        match (self, engine) {
            (EngineSetting::CpuWorkers, EngineKind::Naive) => {
                "it runs every op on the thread that makes it ready; use the pooled or \
                 per-device engine for worker threads"
            }
            (EngineSetting::PriorityWorkers, EngineKind::Naive) => {
                "it runs every op, CpuPrioritized ones too, on the thread that makes it ready; \
                 use the per-device engine for a priority pool"
            }
            (EngineSetting::PriorityWorkers, EngineKind::Pooled) => {
                "its CpuPrioritized ops run on the shared CPU workers (size those with \
                 cpu_workers); use the per-device engine for a separate priority pool"
            }
            _ => "",
        }
    }
}

impl fmt::Display for EngineSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How many workers each of an engine's pool roles has: the same call on every engine
/// ([`Engine::workers`](super::Engine::workers)); a role the engine does not have is 0.
///
/// ```
/// use enginetop::engine::{Engine, EngineKind, EngineOptions};
/// let engine = Engine::new(EngineOptions::new(EngineKind::PerDevice, 2)).unwrap();
/// engine.set_cpu_workers(3).unwrap();
/// assert_eq!(engine.workers().cpu, 3);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct WorkerCounts {
    /// CPU workers: per CPU device (per-device, the devices started later included) or
    /// shared by every op (pooled).
    pub cpu: usize,
    /// The CPU priority pool's workers (per-device).
    pub priority: usize,
    /// The IO worker for copies (pooled).
    pub io: usize,
    /// Compute workers per GPU (per-device with GPUs).
    pub gpu_compute: usize,
    /// Copy workers per GPU (per-device with GPUs).
    pub gpu_copy: usize,
    /// `GpuPrioritized` workers per GPU (per-device with GPUs).
    pub gpu_priority: usize,
}

/// The fix for a count out of `1..=max` (the tail of [`EngineError::WorkerCount`]).
pub(crate) fn count_fix(requested: usize, max: usize) -> String {
    if requested == 0 {
        format!("a pool needs at least 1 worker; use 1 to {max}")
    } else {
        format!(
            "the most is {max} (the engine's max_threads); use 1 to {max}, or build the engine \
             with a larger max_threads (EngineOptions::max_threads, --max-threads)"
        )
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::engine::{Context, Engine, EngineError, EngineOptions, FnProperty, OpSpec};

    const MAX: usize = 6;
    const KINDS: [EngineKind; 3] = [EngineKind::Naive, EngineKind::Pooled, EngineKind::PerDevice];
    const SETTINGS: [EngineSetting; 2] =
        [EngineSetting::CpuWorkers, EngineSetting::PriorityWorkers];

    fn engine(kind: EngineKind) -> Engine {
        let options = EngineOptions::new(kind, 2)
            .cpu_priority_workers(1)
            .max_threads(MAX);
        Engine::new(options).expect("valid settings start")
    }

    fn set(engine: &Engine, setting: EngineSetting, threads: usize) -> Result<(), EngineError> {
        match setting {
            EngineSetting::CpuWorkers => engine.set_cpu_workers(threads),
            EngineSetting::PriorityWorkers => engine.set_priority_workers(threads),
        }
    }

    /// Pushes a normal and a prioritized op and waits: both must run.
    fn push_both(engine: &Engine) {
        let x = engine.new_variable();
        for prop in [FnProperty::Normal, FnProperty::CpuPrioritized] {
            let spec = OpSpec::new("probe")
                .writes(std::slice::from_ref(&x))
                .prop(prop);
            engine
                .push_sync(spec, |_| Ok(()))
                .expect("the push is accepted");
        }
        engine.wait_for_all().expect("both ops ran");
        assert_eq!(x.version(), 2);
    }

    /// Every setting, on every engine, fresh (per-device: no priority pool yet), running (its
    /// pools started by ops) and stopped: the same answer to the same count, and what was
    /// accepted (or refused) leaves the engine able to run every op.
    #[test]
    fn every_engine_answers_every_setting_the_same_before_and_after_start() {
        for kind in KINDS {
            for state in ["fresh", "running", "stopped"] {
                for setting in SETTINGS {
                    for threads in [0, 1, MAX, MAX + 1, 100_000] {
                        let engine = engine(kind);
                        match state {
                            "running" => push_both(&engine),
                            "stopped" => engine.stop().unwrap(),
                            _ => {}
                        }
                        let what = format!("{kind} engine, {state}, {setting} = {threads}");
                        let answer = set(&engine, setting, threads);
                        check_answer(kind, setting, threads, answer, &what);
                        engine.start().unwrap();
                        push_both(&engine);
                    }
                }
            }
        }
    }

    fn check_answer(
        kind: EngineKind,
        setting: EngineSetting,
        threads: usize,
        answer: Result<(), EngineError>,
        what: &str,
    ) {
        let has = setting.limit(kind, MAX).is_some();
        match answer {
            Ok(()) => assert!(has && (1..=MAX).contains(&threads), "{what}: accepted"),
            Err(EngineError::NoSuchSetting { engine, setting: s }) => {
                assert!(!has, "{what}: refused as missing");
                assert_eq!((engine, s), (kind, setting), "{what}");
            }
            Err(EngineError::WorkerCount { requested, max, .. }) => {
                assert!(has && !(1..=MAX).contains(&threads), "{what}: refused");
                assert_eq!((requested, max), (threads, MAX), "{what}");
            }
            Err(other) => panic!("{what}: unexpected error {other}"),
        }
    }

    #[test]
    fn refusals_name_the_engine_the_setting_the_limit_and_the_fix() {
        let per_device = engine(EngineKind::PerDevice);
        let zero = per_device.set_priority_workers(0).unwrap_err().to_string();
        assert_eq!(
            zero,
            "the per-device engine cannot have priority_workers = 0: a pool needs at least 1 \
             worker; use 1 to 6"
        );
        let many = per_device.set_cpu_workers(100_000).unwrap_err().to_string();
        assert!(
            many.contains("cpu_workers = 100000") && many.contains("max_threads"),
            "{many}"
        );
        let naive = engine(EngineKind::Naive).set_cpu_workers(2).unwrap_err();
        assert!(naive
            .to_string()
            .starts_with("the naive engine has no cpu_workers to set"));
        let pooled = engine(EngineKind::Pooled)
            .set_priority_workers(2)
            .unwrap_err();
        assert!(
            pooled.to_string().contains("shared CPU workers"),
            "says what it does instead: {pooled}"
        );
    }

    #[test]
    fn engine_new_checks_the_same_ranges() {
        for kind in [EngineKind::Pooled, EngineKind::PerDevice] {
            for cpu in [0, MAX + 1] {
                let options = EngineOptions::new(kind, cpu).max_threads(MAX);
                assert!(
                    matches!(Engine::new(options), Err(EngineError::WorkerCount { .. })),
                    "{kind} engine with {cpu} CPU workers"
                );
            }
        }
        let options = EngineOptions::new(EngineKind::PerDevice, 1)
            .cpu_priority_workers(0)
            .max_threads(MAX);
        assert!(Engine::new(options).is_err(), "0 priority workers");
        // Settings an engine does not have are not checked at build: options from one
        // RuntimeConfig build every kind.
        let options = EngineOptions::new(EngineKind::Naive, 0).cpu_priority_workers(0);
        assert!(Engine::new(options).is_ok());
    }

    #[test]
    fn every_engine_refuses_the_same_cpu_devices() {
        for kind in KINDS {
            let engine = engine(kind);
            let last = Context::cpu(crate::engine::MAX_CPU_DEVICES - 1);
            let beyond = Context::cpu(crate::engine::MAX_CPU_DEVICES);
            engine
                .push_sync(OpSpec::new("last").ctx(last), |_| Ok(()))
                .unwrap_or_else(|err| panic!("{kind}: {err}"));
            let refused = engine.push_sync(OpSpec::new("beyond").ctx(beyond), |_| Ok(()));
            assert!(
                matches!(refused, Err(EngineError::NoSuchDevice { .. })),
                "{kind}: {refused:?}"
            );
            engine.wait_for_all().unwrap();
        }
    }

    /// One call gives every engine's worker counts, and it follows resizes.
    #[test]
    fn workers_reports_each_role_on_every_engine() {
        let naive = engine(EngineKind::Naive);
        assert_eq!(naive.workers(), WorkerCounts::default());
        let pooled = engine(EngineKind::Pooled);
        pooled.set_cpu_workers(3).unwrap();
        let expected = WorkerCounts {
            cpu: 3,
            io: 1,
            ..WorkerCounts::default()
        };
        assert_eq!(pooled.workers(), expected);
        assert_eq!(pooled.stats().workers.pools[0].num_threads, 3);
        let per_device = engine(EngineKind::PerDevice);
        per_device.set_cpu_workers(4).unwrap();
        per_device.set_priority_workers(2).unwrap(); // before the priority pool starts
        push_both(&per_device);
        let counts = per_device.workers();
        assert_eq!((counts.cpu, counts.priority, counts.io), (4, 2, 0));
        assert_eq!((counts.gpu_compute, counts.gpu_copy), (0, 0), "no GPUs");
        let stats = per_device.stats().workers;
        assert_eq!(stats.pools[0].num_threads, 4);
        assert_eq!(stats.priority.map(|p| p.num_threads), Some(2));
    }
}
