//! Command-line interface: clap parses, the library measures and runs, these modules print.
//!
//! ```text
//! enginetop --workload NAME|PATH [--set NAME=VALUE]... [--iterations N | --duration S]
//!           [--engine naive|pooled|per-device] [--pool simple|eigen|chase-lev]
//!           [--inter N] [--intra M] [--max-threads N] [--gpus ...] [--trace FILE]
//!           [--summary table|json] [--record FILE]
//!           [--headless] [--gemm-peak GFLOPS]
//! enginetop bench pool [--pool simple|eigen|chase-lev|rayon|all] [--threads T] [--json]
//!                      [--reps N] [--bench spawn,tree,parallel_for,wake_hot,wake_cold] [--quick]
//! enginetop bench engine [--engine naive|pooled|per-device|all] [--pool simple|eigen|chase-lev]
//!                        [--threads T] [--json] [--reps N]
//!                        [--bench independent,chain,random_dag,wavefront,binary_tree] [--quick]
//! enginetop bench gemm [--threads T] [--json] [--size N] [--reps N]
//! enginetop bench profiler [--json] [--reps N] [--threads T] [--quick] [--bench ...]
//! enginetop bench gpu [--mode event|sync|both] [--json] [--ops N] [--reps N] [--gpus ...]
//! enginetop bench scaling [--json] [--rounds N]
//! enginetop bench tune [--workload NAMES] [--budget SECONDS] [--space DIMS] [--rounds N] [--json]
//! enginetop tune --workload NAME|PATH [--set NAME=VALUE]... [--budget SECONDS]
//!                [--objective throughput|latency] [--space inter,intra,spin,pool]
//!                [--summary table|json] [--cores N] [--max-threads N] [--engine ...] [--pool ...]
//! enginetop workloads [WORKLOAD [--set NAME=VALUE]...]
//! enginetop devices [--json] [--gpus none|auto|cuda|sim:N]
//! enginetop trace demo [--out FILE] [--pool simple|eigen|chase-lev] [--threads T]
//! enginetop trace validate FILE
//! enginetop export RECORDING --to chrome [--out FILE]
//! enginetop compare A B [--summary table|json]
//! enginetop analyze FILE [--summary table|json]
//! enginetop replay RECORDING [--at TIME] [--summary text|json] | --bench [--bench-mb MB]
//! ```
//! One file per command; new commands go in `Command`.
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};

use crate::config::ConfigOverrides;
use crate::device::discover::GpuSelection;

mod analyze;
mod bench;
mod compare;
#[cfg(feature = "test-fakes")]
mod demo;
mod devices;
mod export;
mod numbers;
mod record;
mod replay;
mod run;
mod trace;
mod tune;
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
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    #[command(flatten)]
    run: run::RunArgs,

    #[command(flatten)]
    gpus: GpuArgs,
}

/// `--gpus`, declared on each command it changes (a run, `devices`, `bench gpu`) so that the
/// others refuse it instead of ignoring it.
#[derive(Debug, Args)]
struct GpuArgs {
    /// GPUs: none, auto (CUDA if usable, else one simulated GPU), cuda, or sim:N
    /// [env: ENGINETOP_GPUS; default: auto].
    #[arg(long, value_name = "none|auto|cuda|sim:N")]
    gpus: Option<GpuSelection>,
}

impl GpuArgs {
    /// The settings these flags override (none given: the environment's, or the defaults).
    fn overrides(&self) -> ConfigOverrides {
        ConfigOverrides {
            gpus: self.gpus,
            ..Default::default()
        }
    }
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
    /// Export a recording (`--record FILE`) as a Chrome trace.
    Export(export::ExportArgs),
    /// Compare two runs (recordings or Chrome traces): step time, configuration, ops,
    /// workers.
    Compare(compare::CompareArgs),
    /// Why a recorded run scales as it does (a recording, or its Chrome export): work, span,
    /// critical path and verdicts, as the run's summary gives them.
    Analyze(analyze::AnalyzeArgs),
    /// Replay a recording in the dashboard: play, pause, speed, step, jump to a time or an op.
    Replay(replay::ReplayArgs),
    /// Find the best inter-op x intra-op thread counts for a workload, measured live.
    Tune(tune::TuneArgs),
    /// The dashboard over its synthetic source (the `test-fakes` feature only).
    #[cfg(feature = "test-fakes")]
    #[command(hide = true)]
    Demo(demo::DemoArgs),
}

/// The `enginetop` binary's entry: parses the command line and runs it; an error is printed
/// with its causes (`error: ...`) and exits with a failure status.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{}", error_line(&err));
            ExitCode::FAILURE
        }
    }
}

/// The line printed for `err`: its message and each cause's, `: `-separated. Library errors
/// never quote their source, so each cause appears once.
fn error_line(err: &anyhow::Error) -> String {
    format!("error: {err:#}")
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Some(Command::Bench(args)) => bench::run(&args),
        Some(Command::Workloads(args)) => workloads::workloads(&args),
        Some(Command::Devices(args)) => devices::devices(&args),
        Some(Command::Trace(args)) => trace::run(&args),
        Some(Command::Export(args)) => export::export(&args),
        Some(Command::Compare(args)) => compare::run(&args),
        Some(Command::Analyze(args)) => analyze::run(&args),
        Some(Command::Replay(args)) => replay::run(&args),
        Some(Command::Tune(args)) => tune::tune(&args, ConfigOverrides::default()),
        #[cfg(feature = "test-fakes")]
        Some(Command::Demo(args)) => demo::run_demo(&args),
        None => run::run_main(&cli.run, cli.gpus.overrides()),
    }
}

#[cfg(test)]
mod tests {
    use crate::profiler::layer::{init_logging, LevelFilter, LogTarget};
    use crate::profiler::Profiler;

    use super::error_line;

    /// What the binary prints when exporting a trace to `path` fails.
    fn export_error_line(path: &str) -> String {
        let err = Profiler::disabled().export_chrome_file(path).unwrap_err();
        error_line(&err.into())
    }

    #[test]
    fn a_trace_in_a_missing_directory_names_the_os_error_once() {
        let dir = format!("enginetop-no-such-dir-{}", std::process::id());
        let path = std::env::temp_dir().join(dir).join("trace.json");
        let path = path.to_str().unwrap();
        assert_eq!(
            export_error_line(path),
            format!(
                "error: could not write the trace to `{path}` (check that its directory exists \
                 and is writable, and that the disk has room): No such file or directory \
                 (os error 2)"
            )
        );
    }

    #[test]
    fn a_trace_on_a_full_device_names_the_os_error_once() {
        if !std::path::Path::new("/dev/full").exists() {
            return; // not Linux
        }
        assert_eq!(
            export_error_line("/dev/full"),
            "error: could not write the trace to `/dev/full` (check that its directory exists \
             and is writable, and that the disk has room): No space left on device (os error 28)"
        );
    }

    #[test]
    fn a_log_file_in_a_missing_directory_names_the_os_error_once() {
        let path = std::env::temp_dir()
            .join(format!("enginetop-no-such-dir-{}", std::process::id()))
            .join("enginetop.log");
        let target = LogTarget::File(path.clone());
        let err = init_logging(&Profiler::disabled(), target, LevelFilter::INFO)
            .err()
            .expect("the log file's directory does not exist");
        assert_eq!(
            error_line(&err.into()),
            format!(
                "error: could not open the log file `{}` (check that its directory exists and \
                 is writable): No such file or directory (os error 2)",
                path.display()
            )
        );
    }

    /// Whether `arg` takes a number.
    fn is_numeric(arg: &clap::Arg) -> bool {
        use std::any::TypeId;
        let id = arg.get_value_parser().type_id();
        [
            TypeId::of::<u16>(),
            TypeId::of::<u32>(),
            TypeId::of::<u64>(),
            TypeId::of::<usize>(),
            TypeId::of::<f64>(),
            TypeId::of::<std::time::Duration>(),
        ]
        .into_iter()
        .any(|numeric| id == numeric)
    }

    /// `(command path, flag)` for every numeric flag of `command` and its subcommands.
    fn numeric_flags(command: &clap::Command, path: Vec<String>) -> Vec<(Vec<String>, String)> {
        let mut flags: Vec<(Vec<String>, String)> = command
            .get_arguments()
            .filter(|arg| is_numeric(arg))
            .filter_map(|arg| Some((path.clone(), format!("--{}", arg.get_long()?))))
            .collect();
        for sub in command.get_subcommands() {
            let mut sub_path = path.clone();
            sub_path.push(sub.get_name().to_string());
            flags.extend(numeric_flags(sub, sub_path));
        }
        flags
    }

    #[test]
    fn every_numeric_flag_refuses_a_negative_number_naming_itself_and_its_range() {
        use clap::{CommandFactory, Parser};
        let flags = numeric_flags(&super::Cli::command(), vec!["enginetop".into()]);
        let names: Vec<&str> = flags.iter().map(|(_, flag)| flag.as_str()).collect();
        for expected in [
            "--intra",
            "--inter",
            "--iterations",
            "--duration",
            "--profile-rows",
        ] {
            assert!(names.contains(&expected), "{expected} not in {names:?}");
        }
        assert!(
            names.contains(&"--size") && names.contains(&"--ops"),
            "{names:?}"
        );
        for (path, flag) in flags {
            let argv = path.iter().map(String::as_str).chain([flag.as_str(), "-1"]);
            let err = super::Cli::try_parse_from(argv).expect_err(&flag);
            let message = err.to_string();
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::ValueValidation,
                "{path:?} {flag}: {message}"
            );
            assert!(message.contains(&format!("for '{flag} <")), "{message}");
            assert!(message.contains("expected"), "{message}");
        }
    }

    #[test]
    fn context_added_in_the_binary_comes_first() {
        let missing = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let err = anyhow::Error::new(missing).context("reading the workload");
        assert_eq!(
            error_line(&err),
            "error: reading the workload: no such file"
        );
    }
}
