//! `enginetop workloads`: the shipped catalog, or one workload checked and summarised.
use anyhow::Result;
use clap::Args;

use crate::workload;

#[derive(Debug, Args)]
pub(super) struct WorkloadsArgs {
    /// A shipped workload's name or the path of a workload file to check and summarise.
    workload: Option<String>,

    /// Override one of the workload's [params] (repeatable), e.g. --set batch=16.
    #[arg(long = "set", value_name = "NAME=VALUE", requires = "workload")]
    set: Vec<String>,
}

/// `enginetop workloads`: the catalog, or one workload's summary (or its load error).
pub(super) fn workloads(args: &WorkloadsArgs) -> Result<()> {
    let Some(spec) = &args.workload else {
        print!("{}", workload::catalog());
        return Ok(());
    };
    let overrides = workload::Overrides::from_args(&args.set)?;
    let graph = workload::load_spec(spec, &overrides)?;
    print!("{}", workload::summary(&graph));
    Ok(())
}
