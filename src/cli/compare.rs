//! `enginetop compare A B [--summary table|json | --view]`: what changed between two runs,
//! printed, or in the interactive compare view.
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use crate::record::compare::{compare, load_profile};
use crate::tui;

/// How `compare` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum CompareFormat {
    /// Tables for people.
    Table,
    /// One JSON object.
    Json,
}

#[derive(Debug, Args)]
pub(super) struct CompareArgs {
    /// The baseline run: a recording (`--record FILE`) or a Chrome trace (`--trace FILE`).
    a: PathBuf,
    /// The run compared with it (deltas are B - A, ratios B / A).
    b: PathBuf,
    /// How to print the comparison.
    #[arg(long, value_enum, default_value_t = CompareFormat::Table)]
    summary: CompareFormat,
    /// Open the interactive compare view in the terminal instead of printing (? for its keys).
    #[arg(long, conflicts_with = "summary")]
    view: bool,
}

pub(super) fn run(args: &CompareArgs) -> Result<()> {
    if args.view && !std::io::stdout().is_terminal() {
        anyhow::bail!(
            "--view needs a terminal, but standard output is not one; drop --view to print \
             the comparison as a table (or --summary json)"
        );
    }
    let a = load_profile(&args.a)?;
    let b = load_profile(&args.b)?;
    let comparison = compare(&a, &b);
    if args.view {
        return tui::compare::run(comparison).context("opening the compare view");
    }
    let text = match args.summary {
        CompareFormat::Table => comparison.to_string(),
        CompareFormat::Json => format!("{}\n", comparison.json()),
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing to stdout")
}
