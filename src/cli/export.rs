//! `enginetop export FILE --to chrome|perfetto [--out PATH]`: a recording as a Chrome trace
//! (JSON) or a Perfetto trace (protobuf, streamed: any size of recording in bounded memory).
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;

use crate::record::{export_chrome, export_perfetto, read_recording};

/// What a recording can be exported to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ExportFormat {
    /// Chrome trace JSON (ui.perfetto.dev, chrome://tracing), as `--trace` writes it.
    Chrome,
    /// Perfetto's protobuf trace (ui.perfetto.dev, trace_processor): the same tracks and
    /// slices, a fraction of the size, written as the recording is read.
    Perfetto,
}

impl ExportFormat {
    /// The extension of the default output path.
    fn extension(self) -> &'static str {
        match self {
            ExportFormat::Chrome => "trace.json",
            ExportFormat::Perfetto => "pftrace",
        }
    }
}

#[derive(Debug, Args)]
pub(super) struct ExportArgs {
    /// The recording (written by `--record FILE`).
    file: PathBuf,
    /// The format to write.
    #[arg(long, value_enum)]
    to: ExportFormat,
    /// Where to write it [default: FILE with the extension `.trace.json` (chrome) or
    /// `.pftrace` (perfetto)].
    #[arg(long, value_name = "PATH")]
    out: Option<PathBuf>,
}

pub(super) fn export(args: &ExportArgs) -> Result<()> {
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| args.file.with_extension(args.to.extension()));
    match args.to {
        ExportFormat::Chrome => export_to_chrome(&args.file, &out),
        ExportFormat::Perfetto => export_to_perfetto(&args.file, &out),
    }
}

fn create(out: &Path) -> Result<std::io::BufWriter<std::fs::File>> {
    super::trace::check_trace_path("--out", out)?;
    let file = std::fs::File::create(out)
        .with_context(|| format!("could not create `{}`", out.display()))?;
    Ok(std::io::BufWriter::new(file))
}

fn export_to_chrome(file: &Path, out: &Path) -> Result<()> {
    let recording = read_recording(file)?;
    if !recording.ending.is_complete() {
        eprintln!(
            "warning: {} is {}; exporting what it holds",
            file.display(),
            recording.ending
        );
    }
    let mut writer = create(out)?;
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

fn export_to_perfetto(file: &Path, out: &Path) -> Result<()> {
    let mut writer = create(out)?;
    let export = match export_perfetto(file, &mut writer) {
        Ok(export) => export,
        Err(error) => {
            drop(writer);
            let _ = std::fs::remove_file(out); // nothing of the recording was written
            return Err(error.into());
        }
    };
    writer
        .flush()
        .with_context(|| format!("could not write `{}`", out.display()))?;
    let report = export.report;
    if let Some(corrupt) = export.corrupt {
        anyhow::bail!(
            "{corrupt}; `{}` holds the {} events before that frame",
            out.display(),
            report.events_in
        );
    }
    if !export.ending.is_complete() {
        eprintln!(
            "warning: {} is {}; exported what it holds",
            file.display(),
            export.ending
        );
    }
    eprintln!(
        "trace: {} ({} packets: {} slices, {} instants, {} counter values, {} flows from {} \
         recorded events; open it in ui.perfetto.dev)",
        out.display(),
        report.packets,
        report.slices,
        report.instants,
        report.counters,
        report.flows,
        report.events_in
    );
    Ok(())
}
