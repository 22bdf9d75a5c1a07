//! `enginetop export FILE --to chrome [--out PATH]`: a recording as a Chrome trace.
use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use enginetop::record::{export_chrome, read_recording};

/// What a recording can be exported to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ExportFormat {
    /// Chrome trace JSON (ui.perfetto.dev, chrome://tracing), as `--trace` writes it.
    Chrome,
}

#[derive(Debug, Args)]
pub(super) struct ExportArgs {
    /// The recording (written by `--record FILE`).
    file: PathBuf,
    /// The format to write.
    #[arg(long, value_enum)]
    to: ExportFormat,
    /// Where to write it [default: FILE with the extension `.trace.json`].
    #[arg(long, value_name = "PATH")]
    out: Option<PathBuf>,
}

pub(super) fn export(args: &ExportArgs) -> Result<()> {
    let recording = read_recording(&args.file)?;
    if !recording.ending.is_complete() {
        eprintln!(
            "warning: {} is {}; exporting what it holds",
            args.file.display(),
            recording.ending
        );
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| args.file.with_extension("trace.json"));
    super::trace::check_trace_path("--out", &out)?;
    let ExportFormat::Chrome = args.to;
    let file = std::fs::File::create(&out)
        .with_context(|| format!("could not create `{}`", out.display()))?;
    let mut writer = std::io::BufWriter::new(file);
    let report = export_chrome(&recording, &mut writer)?;
    writer
        .flush()
        .with_context(|| format!("could not write `{}`", out.display()))?;
    eprintln!(
        "trace: {} ({} events from {} recorded; open it in ui.perfetto.dev or chrome://tracing)",
        out.display(),
        report.trace_events,
        recording.events.len()
    );
    Ok(())
}
