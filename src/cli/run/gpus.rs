//! What the GPUs asked for mean to the workload about to run, said before it runs:
//!
//! - `--gpus cuda` (or `ENGINETOP_GPUS=cuda`) where CUDA cannot be used is refused, with the
//!   reason and the fix, whatever the workload (the run would otherwise go on silently on the
//!   CPU, or fail at its first GPU op);
//! - GPUs asked for (`sim:N`, or `cuda` that works) by a workload that places no op on a GPU
//!   get a warning: they would sit idle. It says how to place the ops: `--set device=gpu:0`
//!   when the workload takes a `device` parameter, else the file's `device` keys and the
//!   shipped workloads that take one.
//!
//! `auto` and `none` ask for nothing in particular, so they get neither.
use anyhow::Result;

use crate::config::RuntimeConfig;
use crate::device::cuda;
use crate::device::discover::{self, GpuSelection};
use crate::workload::{self, Graph, Overrides};

/// The warnings for running `graph` on `config`'s GPUs; an error when CUDA was asked for and
/// cannot be used. `from_flag`: whether `--gpus` chose them (else `ENGINETOP_GPUS` did).
pub(super) fn check(config: &RuntimeConfig, graph: &Graph, from_flag: bool) -> Result<Vec<String>> {
    let setting = match from_flag {
        true => format!("--gpus {}", config.gpus),
        false => format!("ENGINETOP_GPUS={}", config.gpus),
    };
    let places_gpu_ops = graph.ops.iter().any(|op| !op.device.is_cpu());
    let idle = || {
        format!(
            "{} places no op on a GPU: {}",
            graph.name,
            how_to_place(graph)
        )
    };
    match config.gpus {
        GpuSelection::None | GpuSelection::Auto => return Ok(Vec::new()),
        GpuSelection::Sim(_) => {}
        GpuSelection::Cuda => {
            if let Err(err) = discover::choose(GpuSelection::Cuda, &cuda::probe()) {
                let also = match places_gpu_ops {
                    true => String::new(),
                    false => format!(" ({})", idle()),
                };
                anyhow::bail!("{setting}: {err}{also}");
            }
        }
    }
    Ok(match places_gpu_ops {
        true => Vec::new(),
        false => vec![format!(
            "{setting} asked for GPUs that will sit idle: {}",
            idle()
        )],
    })
}

/// How to put `graph`'s ops on GPU 0.
fn how_to_place(graph: &Graph) -> String {
    if takes_device(graph) {
        return "pass --set device=gpu:0 to place them on GPU 0".to_string();
    }
    let shipped = shipped_taking_device();
    format!(
        "its ops take their device from the file (device = \"gpu:0\" on an op or tensor, or \
         default_device); the shipped {} take --set device=gpu:0",
        shipped.join(", ")
    )
}

/// Whether `graph` declares a `device` parameter.
fn takes_device(graph: &Graph) -> bool {
    graph.params.iter().any(|(name, _)| name == "device")
}

/// The shipped workloads that declare a `device` parameter.
fn shipped_taking_device() -> Vec<&'static str> {
    workload::SHIPPED
        .iter()
        .filter(|shipped| {
            workload::load_str(shipped.source, shipped.name, &Overrides::default())
                .is_ok_and(|graph| takes_device(&graph))
        })
        .map(|shipped| shipped.name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(gpus: GpuSelection) -> RuntimeConfig {
        RuntimeConfig {
            gpus,
            ..RuntimeConfig::default()
        }
    }

    fn shipped(name: &str, sets: &[&str]) -> Graph {
        let overrides = Overrides::from_args(sets.iter().copied()).unwrap();
        workload::load_spec(name, &overrides).unwrap()
    }

    #[test]
    fn simulated_gpus_for_a_cpu_only_workload_warn_and_say_how_to_place_ops() {
        let warnings = check(
            &config(GpuSelection::Sim(1)),
            &shipped("pipeline", &[]),
            true,
        );
        assert_eq!(
            warnings.unwrap(),
            [
                "--gpus sim:1 asked for GPUs that will sit idle: pipeline places no op on a GPU: \
              pass --set device=gpu:0 to place them on GPU 0"
            ]
        );
        let on_gpu = shipped("pipeline", &["device=gpu:0"]);
        assert!(check(&config(GpuSelection::Sim(1)), &on_gpu, true)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_workload_without_a_device_parameter_is_told_which_shipped_ones_take_it() {
        let warnings = check(&config(GpuSelection::Sim(2)), &shipped("chain", &[]), false);
        assert_eq!(
            warnings.unwrap(),
            [
                "ENGINETOP_GPUS=sim:2 asked for GPUs that will sit idle: chain places no op on a \
              GPU: its ops take their device from the file (device = \"gpu:0\" on an op or \
              tensor, or default_device); the shipped resnet-like, transformer-like, pipeline \
              take --set device=gpu:0"
            ]
        );
    }

    #[test]
    fn auto_and_none_ask_for_nothing() {
        for gpus in [GpuSelection::Auto, GpuSelection::None] {
            let warnings = check(&config(gpus), &shipped("chain", &[]), true).unwrap();
            assert!(warnings.is_empty(), "{gpus}: {warnings:?}");
        }
    }

    #[test]
    fn cuda_that_cannot_be_used_is_refused_with_the_reason_and_the_fix() {
        if cuda::probe().usable() {
            return; // a machine with CUDA: nothing to refuse
        }
        let err = check(&config(GpuSelection::Cuda), &shipped("pipeline", &[]), true)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("--gpus cuda: CUDA is not available: "),
            "{err}"
        );
        assert!(
            err.ends_with(
                "; use --gpus sim:1 for a simulated GPU (pipeline places no op on a GPU: pass \
                 --set device=gpu:0 to place them on GPU 0)"
            ),
            "{err}"
        );
    }
}
