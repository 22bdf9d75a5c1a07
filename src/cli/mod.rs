//! Command-line interface: clap parses, the library measures and runs, these modules print.
//!
//! ```text
//! enginetop --workload NAME|PATH [--set NAME=VALUE]... [--iterations N | --duration S]
//!           [--engine naive|pooled|per-device] [--pool simple|eigen|chase-lev]
//!           [--inter N] [--intra M] [--max-threads N] [--gpus ...] [--trace FILE]
//!           [--summary table|json]
//!           [--headless] [--gemm-peak GFLOPS]
//! enginetop bench pool [--pool simple|eigen|chase-lev|rayon|all] [--threads T] [--json]
//!                      [--reps N] [--bench spawn,tree,parallel_for,wake_hot,wake_cold] [--quick]
//! enginetop bench engine [--engine naive|pooled|per-device|all] [--pool simple|eigen|chase-lev]
//!                        [--threads T] [--json] [--reps N]
//!                        [--bench independent,chain,random_dag,wavefront,binary_tree] [--quick]
//! enginetop bench gemm [--threads T] [--json] [--size N] [--reps N]
//! enginetop bench profiler [--json] [--reps N] [--threads T] [--quick] [--bench ...]
//! enginetop bench gpu [--mode event|sync|both] [--json] [--ops N] [--reps N] [--gpus ...]
//! enginetop workloads [WORKLOAD [--set NAME=VALUE]...]
//! enginetop devices [--json] [--gpus none|auto|cuda|sim:N]
//! enginetop trace demo [--out FILE] [--pool simple|eigen|chase-lev] [--threads T]
//! enginetop trace validate FILE
//! ```
//! One file per command; new commands go in [`Command`].
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

use enginetop::config::ConfigOverrides;
use enginetop::device::discover::GpuSelection;

mod bench;
mod devices;
mod run;
mod trace;
mod workloads;

/// enginetop: Eigen's thread pools and MXNet's dependency engine, re-created and made visible.
#[derive(Debug, Parser)]
///
/// Run a workload with `enginetop --workload resnet-like` (see `enginetop workloads`).
#[command(
    name = "enginetop",
    version,
    about,
    arg_required_else_help = true,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    #[command(flatten)]
    run: run::RunArgs,

    /// GPUs: none, auto (CUDA if usable, else one simulated GPU), cuda, or sim:N
    /// [env: ENGINETOP_GPUS; default: auto].
    #[arg(long, global = true, value_name = "none|auto|cuda|sim:N")]
    gpus: Option<GpuSelection>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run benchmarks and print their figures.
    Bench(bench::BenchArgs),
    /// List the shipped workloads, or load one (a name or a .toml path) and summarise it.
    Workloads(workloads::WorkloadsArgs),
    /// List CPU and GPU devices, and which GPU backend `auto` picks.
    Devices(devices::DevicesArgs),
    /// Record and check Chrome traces.
    Trace(trace::TraceArgs),
}

/// Parses the command line and runs it; errors are printed with their causes.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", error_text(&err));
            ExitCode::FAILURE
        }
    }
}

/// `err` and its causes, `: `-separated like `{:#}`, leaving out a cause that its error's
/// message already quotes (`could not write ...: No such file ...; check ...` would else
/// end with the OS error a second time).
fn error_text(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let cause = cause.to_string();
        if text.contains(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}

fn run(cli: Cli) -> Result<()> {
    let overrides = ConfigOverrides {
        gpus: cli.gpus,
        ..Default::default()
    };
    match cli.command {
        Some(Command::Bench(args)) => bench::run(&args, &overrides),
        Some(Command::Workloads(args)) => workloads::workloads(&args),
        Some(Command::Devices(args)) => devices::devices(&args, &overrides),
        Some(Command::Trace(args)) => trace::run(&args),
        None => run::run_main(&cli.run, overrides),
    }
}

#[cfg(test)]
mod tests {
    use super::error_text;

    #[derive(Debug, thiserror::Error)]
    #[error("could not write `x`: {source}; check the path")]
    struct Quoting {
        source: std::io::Error,
    }

    #[test]
    fn a_cause_the_message_already_quotes_is_not_repeated() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let err = anyhow::Error::new(Quoting { source: io() });
        assert_eq!(
            error_text(&err),
            "could not write `x`: no such file; check the path"
        );
        let wrapped = anyhow::Error::new(io()).context("reading the workload");
        assert_eq!(error_text(&wrapped), "reading the workload: no such file");
    }
}
