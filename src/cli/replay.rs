//! `enginetop replay FILE`: the dashboard over a recording, with a time cursor; `--summary
//! text|json` prints the profiler's summary at the end (or at `--at`) instead; `--bench`
//! times opening and scrubbing a generated ~1 GB recording.
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::record::replay_bench::bench_replay;
use crate::record::Replay;
use crate::tui::replay::{parse_time, FEED_BUDGET};
use crate::tui::{self, ReplaySource};

/// How `--summary` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum SummaryFormat {
    /// The profiler's table, for people.
    Text,
    /// One JSON object.
    Json,
}

#[derive(Debug, Args)]
pub(super) struct ReplayArgs {
    /// The recording (written by `--record FILE`).
    #[arg(required_unless_present = "bench")]
    file: Option<PathBuf>,
    /// Start at this time of the run, paused (12.5, 800ms, 1m30s) [default: the start,
    /// playing].
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
    at: Option<Duration>,
    /// No dashboard: print the profiler's summary at the end of the recording (at `--at`,
    /// if given) and what the file lost.
    #[arg(long, value_enum, value_name = "FORMAT")]
    summary: Option<SummaryFormat>,
    /// Write a synthetic recording of `--bench-mb` MB to the temporary directory, time
    /// opening and scrubbing it, print the figures and delete it.
    #[arg(long, conflicts_with_all = ["file", "at", "summary"])]
    bench: bool,
    /// The synthetic recording's size for `--bench`, in MB.
    #[arg(
        long,
        value_name = "MB",
        default_value_t = 1024,
        requires = "bench",
        value_parser = super::numbers::whole::<u64>(1, 1 << 20),
        allow_negative_numbers = true,
    )]
    bench_mb: u64,
    /// The op names of `--bench`'s synthetic run (every checkpoint holds each one's row).
    #[arg(
        long,
        value_name = "N",
        default_value_t = crate::record::replay_bench::OP_NAMES,
        requires = "bench",
        value_parser = super::numbers::whole::<u32>(1, 1 << 20),
        allow_negative_numbers = true,
    )]
    bench_names: u32,
    /// Time the chunk encodings `--record` could use on FILE's events (ns and bytes per
    /// event, one row per candidate) and print them.
    #[arg(long, requires = "file", conflicts_with_all = ["at", "summary", "bench"])]
    bench_encoding: bool,
}

pub(super) fn run(args: &ReplayArgs) -> Result<()> {
    if args.bench {
        return bench(args.bench_mb, args.bench_names);
    }
    let Some(file) = &args.file else {
        bail!("pass the recording to replay: enginetop replay FILE");
    };
    if args.bench_encoding {
        return bench_encoding(file);
    }
    let mut replay = Replay::open(file)?;
    let at = args.at.map(|at| {
        let nanos = u64::try_from(at.as_nanos()).unwrap_or(u64::MAX);
        replay.start_ns().saturating_add(nanos)
    });
    match args.summary {
        Some(format) => {
            if let Some(at) = at {
                replay.seek(at)?;
            }
            summary(&mut replay, format, at.is_some())
        }
        None => {
            // The dashboard moves the statistics to `--at` frame by frame (never a frozen
            // first frame on a large recording).
            let source = ReplaySource::new(replay, at.is_some());
            let source = match at {
                Some(at) => source.starting_at(at),
                None => source,
            };
            tui::run(source, tui::RunOptions::default())?;
            Ok(())
        }
    }
}

fn summary(replay: &mut Replay, format: SummaryFormat, at: bool) -> Result<()> {
    if !at {
        replay.seek_to_end()?;
    }
    let seconds = |ns: u64| ns.saturating_sub(replay.start_ns()) as f64 / 1e9;
    let (cursor_s, total_s) = (seconds(replay.cursor_ns()), seconds(replay.end_ns()));
    let losses = replay.losses();
    let summary = replay.summary();
    let index = replay.index();
    let text = match format {
        SummaryFormat::Json => {
            let json = serde_json::json!({
                "file": index.path(),
                "workload": index.info.workload,
                "cursor_s": cursor_s,
                "total_s": total_s,
                "complete": index.complete,
                "losses": losses,
                "profiler": summary.to_json_top(usize::MAX),
            });
            format!("{json}\n")
        }
        SummaryFormat::Text => {
            let mut text = format!(
                "replay of {} ({}) at {cursor_s:.6} s of {total_s:.6} s\n",
                index.path(),
                index.info.workload
            );
            for loss in &losses {
                text.push_str(&format!("lost: {loss}\n"));
            }
            text.push_str(&summary.table());
            text
        }
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing to stdout")
}

fn bench(megabytes: u64, names: u32) -> Result<()> {
    let path = std::env::temp_dir().join(format!(
        "enginetop-replay-bench-{}.etrec",
        std::process::id()
    ));
    eprintln!(
        "writing a {megabytes} MB synthetic recording of {names} op names to {} (deleted \
         afterwards)",
        path.display()
    );
    let bench = bench_replay(&path, megabytes << 20, FEED_BUDGET, names)?;
    let ms = |time: Duration| format!("{:.1} ms", time.as_secs_f64() * 1e3);
    let mb = |bytes: u64| format!("{:.1} MB", bytes as f64 / (1 << 20) as f64);
    println!(
        "recording: {} ({} bytes), {} events, {} frames (written in {})",
        mb(bench.bytes),
        bench.bytes,
        bench.events,
        bench.frames,
        ms(bench.write)
    );
    println!(
        "checkpoints in the file: {} ({}, {:.1}% of it)",
        bench.checkpoints,
        mb(bench.checkpoint_bytes),
        bench.checkpoint_bytes as f64 * 100.0 / bench.bytes.max(1) as f64
    );
    let rows = [
        ("open (index, ends, state at the start)", ms(bench.open)),
        (
            "first far jump (to 90%, right after open): first frame",
            ms(bench.first_jump_frame),
        ),
        (
            "first far jump: statistics at the target",
            format!(
                "{} ({} frames)",
                ms(bench.first_jump_reached),
                bench.first_jump_frames
            ),
        ),
        (
            "random far jumps, median",
            format!(
                "{} (of {})",
                ms(bench.random_median()),
                bench.random_jumps.len()
            ),
        ),
        ("random far jumps, max", ms(bench.random_max())),
        ("step forward one 16x frame (1.6 s of run)", ms(bench.step)),
        ("step back one 16x frame", ms(bench.step_back)),
    ];
    let width = rows.iter().map(|(what, _)| what.len()).max().unwrap_or(0);
    println!("{:width$}  time", "measure");
    for (what, time) in rows {
        println!("{what:width$}  {time}");
    }
    let memory = bench.memory.map_or_else(|| "not measured".to_string(), mb);
    println!("resident memory grown (open, jumps and steps): {memory}");
    println!(
        "frame budget: {} of feeding in a frame of 100 ms (10 frames a second)",
        ms(bench.budget)
    );
    Ok(())
}

fn bench_encoding(file: &std::path::Path) -> Result<()> {
    use crate::record::encode_bench::{bench_encodings, checkpoint_sizes};
    for (k, size) in checkpoint_sizes(file)?.iter().enumerate() {
        println!(
            "checkpoint {k}: {} B framed; {} names; tables {} B, statistics {} B uncompressed",
            size.frame_bytes, size.names, size.tables_bytes, size.stats_bytes
        );
    }
    let (events, figures) = bench_encodings(file)?;
    println!("{events} events of {}", file.display());
    println!("{:<44} {:>9} {:>9}", "encoding", "ns/event", "B/event");
    for figure in figures {
        println!(
            "{:<44} {:>9.1} {:>9.2}",
            figure.name, figure.ns_per_event, figure.bytes_per_event
        );
    }
    Ok(())
}
