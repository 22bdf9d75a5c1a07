//! Command-line interface.
use clap::Parser;

/// enginetop: Eigen's thread pools and MXNet's dependency engine, re-created and made visible.
#[derive(Debug, Parser)]
#[command(name = "enginetop", version, about)]
pub struct Cli {}

pub fn main() -> std::process::ExitCode {
    let _cli = Cli::parse();
    std::process::ExitCode::SUCCESS
}
