//! What devices exist, and which GPU backend `--gpus` (`ENGINETOP_GPUS`) picks.
//!
//! - `none`: no GPUs; ops on a GPU context are refused.
//! - `cuda`: the real GPUs; an error naming the reason when CUDA cannot be used.
//! - `sim:N`: N simulated GPUs (1 to [`MAX_SIM_GPUS`]).
//! - `auto` (the default): CUDA when the driver, a GPU and the kernel libraries are there;
//!   otherwise one simulated GPU, with a [`GpuChoice::notice`] that callers print, so a
//!   simulated GPU is never used without saying so.
//!
//! [`devices_report`] is what `enginetop devices` prints: the CPU side from the
//! [`RuntimeConfig`], every GPU backend, and what `auto` and the configured selection pick.
#![forbid(unsafe_code)]

use std::fmt;
// std's `Arc`: handles to trait objects, which loom's `Arc` cannot coerce to `dyn`.
use std::sync::Arc;

use super::cuda::{CudaBackend, CudaProbe};
use super::sim::{SimBackend, SimModel};
use super::stream::{BackendKind, GpuBackend, GpuInfo, StreamError};
use crate::config::RuntimeConfig;
pub use crate::config::{GpuSelection, GpuSelectionError, MAX_SIM_GPUS};

/// What a [`GpuSelection`] comes to on this machine.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct GpuChoice {
    /// What was asked for.
    pub selection: GpuSelection,
    /// The backend picked (`None`: no GPUs).
    pub backend: Option<BackendKind>,
    /// How many GPUs.
    pub devices: u32,
    /// Why, in a sentence.
    pub why: String,
    /// Set when `auto` fell back to a simulated GPU: callers print it.
    pub notice: Option<String>,
}

/// Decides what `selection` gives, given what CUDA detection found.
///
/// ```
/// use enginetop::device::cuda::{CudaProbe, CudaProblem};
/// use enginetop::device::discover::{choose, GpuSelection};
///
/// let no_driver = CudaProbe { driver_version: None, devices: vec![], problem: Some(CudaProblem::NoDriver) };
/// let choice = choose(GpuSelection::Auto, &no_driver).unwrap();
/// assert_eq!(
///     choice.notice.as_deref(),
///     Some("no CUDA driver found (libcuda.so not loadable); using a simulated GPU")
/// );
/// assert!(choose(GpuSelection::Cuda, &no_driver).is_err());
/// ```
pub fn choose(selection: GpuSelection, probe: &CudaProbe) -> Result<GpuChoice, StreamError> {
    let choice = |backend, devices, why: String, notice| GpuChoice {
        selection,
        backend,
        devices,
        why,
        notice,
    };
    Ok(match selection {
        GpuSelection::None => choice(None, 0, "no GPUs asked for".into(), None),
        GpuSelection::Sim(count) => {
            let why = format!("{count} simulated GPU(s) asked for");
            choice(Some(BackendKind::Sim), count, why, None)
        }
        GpuSelection::Cuda => match cuda_problem(probe) {
            None => {
                let count = probe.devices.len() as u32;
                let why = format!("CUDA found {count} GPU(s)");
                choice(Some(BackendKind::Cuda), count, why, None)
            }
            Some(reason) => return Err(StreamError::CudaUnavailable { reason }),
        },
        GpuSelection::Auto => choose_auto(probe),
    })
}

/// What `auto` gives: CUDA when usable, else one simulated GPU with a notice.
fn choose_auto(probe: &CudaProbe) -> GpuChoice {
    let (backend, devices, why, notice) = match cuda_problem(probe) {
        None => {
            let count = probe.devices.len() as u32;
            let why = format!("CUDA found {count} GPU(s)");
            (BackendKind::Cuda, count, why, None)
        }
        Some(reason) => {
            let notice = format!("{reason}; using a simulated GPU");
            (BackendKind::Sim, 1, notice.clone(), Some(notice))
        }
    };
    GpuChoice {
        selection: GpuSelection::Auto,
        backend: Some(backend),
        devices,
        why,
        notice,
    }
}

/// Why CUDA cannot be used, if it cannot.
fn cuda_problem(probe: &CudaProbe) -> Option<String> {
    match &probe.problem {
        Some(problem) => Some(problem.to_string()),
        None if probe.devices.is_empty() => Some("the CUDA driver found no GPU".to_string()),
        None => None,
    }
}

/// The backend for `choice`: CUDA over `probe`, or simulated GPUs timed by `model`.
pub fn backend_for(
    choice: &GpuChoice,
    probe: CudaProbe,
    model: SimModel,
) -> Option<Arc<dyn GpuBackend>> {
    match choice.backend? {
        BackendKind::Cuda => Some(Arc::new(CudaBackend::from_probe(probe))),
        BackendKind::Sim => Some(Arc::new(SimBackend::new(choice.devices, model))),
    }
}

/// What `enginetop devices` shows.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct DevicesReport {
    /// The CPU side.
    pub cpu: CpuReport,
    /// What CUDA detection found.
    pub cuda: CudaReport,
    /// What one simulated GPU is.
    pub sim: GpuInfo,
    /// What `auto` picks here.
    pub auto: GpuChoice,
    /// What the configured `--gpus` / `ENGINETOP_GPUS` picks...
    pub configured: Option<GpuChoice>,
    /// ... or why it cannot be used.
    pub(crate) configured_error: Option<String>,
}

/// CPU devices: the cores and the pools the configuration builds.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CpuReport {
    /// CPUs this process may run on.
    pub schedulable_cores: usize,
    /// The pool implementation.
    pub pool: String,
    /// Inter-op pool threads (resolved).
    pub inter_op_threads: usize,
    /// Intra-op pool threads (resolved).
    pub intra_op_threads: usize,
    /// The most threads a pool may be resized to.
    pub max_threads: usize,
    /// Whether idle workers may spin.
    pub spinning: bool,
}

/// CUDA detection, for the report.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CudaReport {
    /// Whether the CUDA backend can be used.
    pub usable: bool,
    /// The driver's version.
    pub driver_version: Option<String>,
    /// The GPUs the driver reports.
    pub devices: Vec<GpuInfo>,
    /// Why it cannot be used.
    pub problem: Option<String>,
}

/// Builds the `enginetop devices` report from `config` and a CUDA probe.
pub fn devices_report(config: &RuntimeConfig, probe: &CudaProbe) -> DevicesReport {
    let threads = config.resolved();
    let sim = SimBackend::new(1, SimModel::default()).devices().remove(0);
    let configured = choose(config.gpus, probe);
    DevicesReport {
        auto: choose_auto(probe),
        configured_error: configured.as_ref().err().map(ToString::to_string),
        configured: configured.ok(),
        cpu: CpuReport {
            schedulable_cores: config.schedulable_cpus,
            pool: config.pool_kind.to_string(),
            inter_op_threads: threads.inter_op,
            intra_op_threads: threads.intra_op,
            max_threads: config.max_threads,
            spinning: config.allow_spinning,
        },
        cuda: CudaReport {
            usable: probe.usable(),
            driver_version: probe.driver_version.clone(),
            devices: probe.devices.clone(),
            problem: cuda_problem(probe),
        },
        sim,
    }
}

impl fmt::Display for DevicesReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cpu = &self.cpu;
        writeln!(f, "CPU")?;
        writeln!(f, "  schedulable cores  {}", cpu.schedulable_cores)?;
        let threads = |count: usize| format!("{count} thread{}", if count == 1 { "" } else { "s" });
        writeln!(
            f,
            "  inter-op pool      {}, {}",
            cpu.pool,
            threads(cpu.inter_op_threads)
        )?;
        writeln!(
            f,
            "  intra-op pool      {}, {}",
            cpu.pool,
            threads(cpu.intra_op_threads)
        )?;
        writeln!(
            f,
            "  max threads        {} (spinning {})",
            cpu.max_threads,
            if cpu.spinning { "on" } else { "off" }
        )?;
        writeln!(f, "GPUs")?;
        self.fmt_cuda(f)?;
        writeln!(f, "  sim    --gpus sim:N gives N x {}", self.sim.name)?;
        writeln!(f, "auto picks       {}", choice_text(&self.auto))?;
        match (&self.configured, &self.configured_error) {
            (Some(choice), _) => {
                let selection = choice.selection.to_string();
                writeln!(f, "--gpus {selection:<9} {}", choice_text(choice))
            }
            (None, error) => {
                let reason = error.as_deref().unwrap_or("unknown");
                writeln!(f, "--gpus           cannot be used: {reason}")
            }
        }
    }
}

impl DevicesReport {
    fn fmt_cuda(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cuda = &self.cuda;
        if cuda.devices.is_empty() {
            let reason = cuda.problem.as_deref().unwrap_or("no GPU");
            return writeln!(f, "  cuda   none found: {reason}");
        }
        let driver = cuda.driver_version.as_deref().unwrap_or("unknown");
        for gpu in &cuda.devices {
            let (major, minor) = gpu.compute_capability.unwrap_or_default();
            writeln!(
                f,
                "  cuda   gpu{}: {}, {:.1} GiB, compute {major}.{minor}, driver {driver}",
                gpu.ordinal,
                gpu.name,
                gpu.memory_bytes as f64 / f64::from(1u32 << 30),
            )?;
        }
        if let Some(problem) = &cuda.problem {
            writeln!(f, "  cuda   unusable: {problem}")?;
        }
        Ok(())
    }
}

/// `sim x1 (no CUDA driver ...; using a simulated GPU)`, `cuda x2 (CUDA found 2 GPU(s))`,
/// `no GPUs`.
fn choice_text(choice: &GpuChoice) -> String {
    choice.to_string()
}

impl fmt::Display for GpuChoice {
    /// `sim x1 (no CUDA driver found ...; using a simulated GPU)`, `no GPUs (...)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.backend {
            None => write!(f, "no GPUs ({})", self.why),
            Some(backend) => write!(f, "{backend} x{} ({})", self.devices, self.why),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::device::cuda::CudaProblem;

    fn probe_with(devices: u32, problem: Option<CudaProblem>) -> CudaProbe {
        let gpu = |ordinal| GpuInfo {
            ordinal,
            backend: BackendKind::Cuda,
            simulated: false,
            name: "NVIDIA H100 80GB HBM3".into(),
            memory_bytes: 80 << 30,
            compute_capability: Some((9, 0)),
            driver_version: Some("13.0".into()),
            model: None,
        };
        CudaProbe {
            driver_version: Some("13.0".into()),
            devices: (0..devices).map(gpu).collect(),
            problem,
        }
    }

    #[test]
    fn auto_takes_cuda_when_it_is_usable() {
        let choice = choose(GpuSelection::Auto, &probe_with(2, None)).unwrap();
        assert_eq!(
            (choice.backend, choice.devices),
            (Some(BackendKind::Cuda), 2)
        );
        assert_eq!(choice.notice, None);
    }

    #[test]
    fn auto_falls_back_to_one_simulated_gpu_with_a_notice() {
        for (probe, reason) in [
            (
                probe_with(0, Some(CudaProblem::NoDriver)),
                "no CUDA driver found (libcuda.so not loadable)",
            ),
            (
                probe_with(0, Some(CudaProblem::NoDevice)),
                "the CUDA driver found no GPU (CUDA_ERROR_NO_DEVICE)",
            ),
            (
                probe_with(1, Some(CudaProblem::MissingLibrary("libnvrtc"))),
                "libnvrtc not loadable (the kernels need it); add the CUDA toolkit's lib64 to \
                 LD_LIBRARY_PATH, e.g. /usr/local/cuda/lib64",
            ),
        ] {
            let choice = choose(GpuSelection::Auto, &probe).unwrap();
            assert_eq!(
                (choice.backend, choice.devices),
                (Some(BackendKind::Sim), 1)
            );
            assert_eq!(
                choice.notice,
                Some(format!("{reason}; using a simulated GPU"))
            );
        }
    }

    #[test]
    fn cuda_without_cuda_is_an_error_naming_the_reason_and_the_fix() {
        let err = choose(
            GpuSelection::Cuda,
            &probe_with(0, Some(CudaProblem::NoDriver)),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "CUDA is not available: no CUDA driver found (libcuda.so not loadable); use --gpus \
             sim:1 for a simulated GPU"
        );
    }

    #[test]
    fn explicit_choices_are_taken_as_given() {
        let probe = probe_with(0, Some(CudaProblem::NoDriver));
        let sim = choose(GpuSelection::Sim(3), &probe).unwrap();
        assert_eq!(
            (sim.backend, sim.devices, sim.notice.clone()),
            (Some(BackendKind::Sim), 3, None)
        );
        let none = choose(GpuSelection::None, &probe).unwrap();
        assert_eq!((none.backend, none.devices), (None, 0));
        let backend = backend_for(&sim, probe, SimModel::instant()).unwrap();
        assert_eq!(backend.devices().len(), 3);
    }

    #[test]
    fn the_report_lists_cpu_and_gpus_and_what_auto_picks() {
        let config = RuntimeConfig {
            inter_op_threads: 2,
            intra_op_threads: 3,
            ..RuntimeConfig::default()
        };
        let report = devices_report(&config, &probe_with(0, Some(CudaProblem::NoDriver)));
        let text = report.to_string();
        assert!(
            text.contains("inter-op pool      eigen, 2 threads"),
            "{text}"
        );
        assert!(
            text.contains("cuda   none found: no CUDA driver found (libcuda.so not loadable)"),
            "{text}"
        );
        assert!(
            text.contains("auto picks       sim x1 (no CUDA driver found"),
            "{text}"
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["auto"]["backend"], "sim");
        assert_eq!(json["cuda"]["usable"], false);
        assert_eq!(json["sim"]["simulated"], true);

        let with_gpu = devices_report(&config, &probe_with(1, None)).to_string();
        assert!(
            with_gpu
                .contains("cuda   gpu0: NVIDIA H100 80GB HBM3, 80.0 GiB, compute 9.0, driver 13.0"),
            "{with_gpu}"
        );
        assert!(
            with_gpu.contains("auto picks       cuda x1 (CUDA found 1 GPU(s))"),
            "{with_gpu}"
        );
    }
}
