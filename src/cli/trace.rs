//! `enginetop trace ...`: check a Chrome trace file, or record a demo one.
use std::path::Path;

use anyhow::{Context, Result};
use clap::builder::PossibleValuesParser;
use clap::{Args, Subcommand};

use crate::pool::PoolKind;
use crate::profiler::demo::{run_pool_demo, DemoOptions};
use crate::profiler::{validate, Profiler, ProfilerOptions};

#[derive(Debug, Args)]
pub(super) struct TraceArgs {
    #[command(subcommand)]
    action: TraceAction,
}

#[derive(Debug, Subcommand)]
enum TraceAction {
    /// Check a Chrome trace file: it must load cleanly in Perfetto and chrome://tracing,
    /// and be readable there
    ///
    /// Times are read as viewers read them: `ts` and `dur` as doubles in microseconds, a
    /// slice's end as `ts + dur` in doubles. Beyond what the viewers require (a known `ph`,
    /// numeric pid/tid/ts, `dur` on slices, balanced `B`/`E`, numeric counters, paired
    /// flows), every thread with events must be named by `thread_name` metadata, no two
    /// slices on a thread may partially overlap (at equal `ts` the longer comes first), no
    /// slice may be a 1 ns marker, and no slice `args` key may differ on every call of a
    /// name: the viewers load such traces, but show unnamed rows, stack slices wrongly and
    /// split an op's calls into one frame each. A trace that says it lacks events
    /// (`otherData.dropped_events`, `evicted_events`) gets a warning with the counts.
    Validate {
        /// The trace (JSON).
        file: std::path::PathBuf,
        /// Fail (exit 1) when the trace lacks events it says were dropped or evicted.
        #[arg(long)]
        strict: bool,
    },
    /// Run a short profiled pool workload and export its Chrome trace.
    Demo(TraceDemoArgs),
}

#[derive(Debug, Args)]
struct TraceDemoArgs {
    /// Where to write the trace.
    #[arg(long, default_value = "enginetop-demo.trace.json")]
    out: std::path::PathBuf,

    /// The pool kind to run.
    #[arg(
        long,
        default_value = "eigen",
        value_parser = PossibleValuesParser::new(["simple", "eigen", "chase-lev"]),
    )]
    pool: String,

    /// Worker threads (the demo grows the pool to twice this, back, and up again).
    #[arg(
        long,
        default_value_t = 2,
        value_parser = super::numbers::whole::<u16>(1, 512),
        allow_negative_numbers = true,
    )]
    threads: u16,
}

/// Runs the chosen trace action.
pub(super) fn run(args: &TraceArgs) -> Result<()> {
    match &args.action {
        TraceAction::Validate { file, strict } => trace_validate(file, *strict),
        TraceAction::Demo(args) => trace_demo(args),
    }
}

/// Checks, before a run, that a trace can be written to `path` (given with `flag`): its
/// directory exists and `path` is not a directory; a file that is not there yet is created
/// and removed again, so a run is not spent before a path that cannot be written.
pub(super) fn check_trace_path(flag: &str, path: &Path) -> Result<()> {
    let shown = path.display();
    if path.is_dir() {
        anyhow::bail!(
            "{flag} {shown} is a directory: name a file, e.g. {}",
            path.join("trace.json").display()
        );
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        let problem = match dir.exists() {
            true => "is not a directory",
            false => "does not exist",
        };
        anyhow::bail!(
            "{flag} {shown}: {} {problem}; create it, or name a file in an existing directory",
            dir.display()
        );
    }
    let existed = path.exists();
    let opened = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path);
    if let Err(error) = opened {
        anyhow::bail!("{flag} {shown} cannot be written ({error}); name a writable file");
    }
    if !existed {
        let _ = std::fs::remove_file(path); // best effort: the export creates it again
    }
    Ok(())
}

/// `enginetop trace validate FILE`: prints what the trace holds, or every problem (exit 1);
/// warns when the trace lacks events, and fails on that too when `strict`.
pub(super) fn trace_validate(file: &std::path::Path, strict: bool) -> Result<()> {
    let summary = validate::validate_file(file)
        .map_err(|problems| anyhow::anyhow!("{}: {problems}", file.display()))?;
    println!(
        "{}: valid Chrome trace: {} events, {} named tracks, {} slices, {} flows",
        file.display(),
        summary.events,
        summary.tracks,
        summary.slices,
        summary.flows
    );
    if summary.lacks_events() {
        let lacking = lacking_events(&summary);
        if strict {
            anyhow::bail!("{}: {lacking} (--strict)", file.display());
        }
        eprintln!(
            "warning: {}: {lacking}; --strict makes this an error",
            file.display()
        );
    }
    Ok(())
}

/// What a trace that lacks events lacks, and what that means for it.
fn lacking_events(summary: &validate::TraceSummary) -> String {
    let dropped = summary.dropped_events.unwrap_or(0);
    let evicted = summary.evicted_events.unwrap_or(0);
    format!(
        "the trace lacks events: {dropped} dropped (a profiler ring was full: the collector \
         fell behind) and {evicted} evicted (older than its window, or past its size); ops \
         and states around them are missing from it"
    )
}

/// `enginetop trace demo`: a profiled pool workload, exported and validated.
fn trace_demo(args: &TraceDemoArgs) -> Result<()> {
    check_trace_path("--out", &args.out)?;
    let profiler = Profiler::new(ProfilerOptions::default())?;
    let options = DemoOptions {
        kind: args.pool.parse::<PoolKind>()?,
        threads: usize::from(args.threads),
        ..DemoOptions::default()
    };
    let report = run_pool_demo(&profiler, &options).context("the demo pool failed")?;
    let export = profiler.export_chrome_file(&args.out)?;
    eprint!("{}", profiler.summary().table());
    println!(
        "{}: {} ops ({} failed), {} resizes; {} trace events, {} flows, {} dropped",
        args.out.display(),
        report.ops,
        report.failed_ops,
        report.resizes,
        export.trace_events,
        export.flows,
        profiler.snapshot().dropped_events
    );
    trace_validate(&args.out, false)
}
