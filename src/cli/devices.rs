//! `enginetop devices`: CPU cores and pools, GPUs per backend, and what `--gpus auto` picks.
use anyhow::Result;
use clap::Args;

use crate::config::RuntimeConfig;
use crate::device::cuda;
use crate::device::discover;

#[derive(Debug, Args)]
pub(super) struct DevicesArgs {
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    gpus: super::GpuArgs,
}

/// `enginetop devices`: CPU cores and pools, GPUs per backend, what `auto` picks.
pub(super) fn devices(args: &DevicesArgs) -> Result<()> {
    let config = RuntimeConfig::load(&args.gpus.overrides())?;
    let report = discover::devices_report(&config, &cuda::probe());
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{report}");
    }
    Ok(())
}
