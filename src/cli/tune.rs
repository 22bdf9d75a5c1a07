//! `enginetop tune --workload NAME|PATH ...`: search the inter-op x intra-op counts on one
//! running workload, resized live between windows, and print the surface, the best, the
//! default, the gain and the flags that reproduce the best.
use std::io::{IsTerminal, Write};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;

use crate::config::{ConfigOverrides, RuntimeConfig};
use crate::engine::EngineKind;
use crate::pool::PoolKind;
use crate::tune::{self, Objective, Phase, ProbeEvent, Setting, Space, TuneOptions, TuneStop};
use crate::workload;
use crate::workload::run::{Driver, RunHooks};

/// `--objective`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ObjectiveArg {
    /// Iterations per second (higher is better).
    Throughput,
    /// Step time (lower is better).
    Latency,
}

/// `--summary`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum SummaryFormat {
    /// A table and a heat map for people.
    Table,
    /// One JSON object.
    Json,
}

/// `enginetop tune`.
#[derive(Debug, Args)]
pub(super) struct TuneArgs {
    /// Tune this workload: a shipped name (see `enginetop workloads`) or a .toml path.
    #[arg(long, value_name = "NAME|PATH", required = true)]
    workload: String,

    /// Override one of the workload's [params] (repeatable), e.g. --set batch=4.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    set: Vec<String>,

    /// Seconds the whole search may take, the pick's paired check against the default
    /// included (every window is as long; the pairs get 24 of them).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value = "60",
        value_parser = parse_budget,
        allow_negative_numbers = true
    )]
    budget: Duration,

    /// What is better: throughput (iterations/s) or latency (step time).
    #[arg(long, value_enum, default_value_t = ObjectiveArg::Throughput)]
    objective: ObjectiveArg,

    /// The dimensions searched, comma-separated: inter, intra (live, on one run), spin, pool
    /// (fixed when a run builds its pools: one run per setting, rebuilt, then the best of
    /// each compared in interleaved rounds; the dashboard's tuner keeps to inter, intra).
    #[arg(long, value_name = "DIMS", default_value = "inter,intra", value_parser = parse_space)]
    space: Space,

    /// How to print the result.
    #[arg(long, value_enum, default_value_t = SummaryFormat::Table)]
    summary: SummaryFormat,

    /// The most threads one pool may have: no point searched goes past it (1 to 4096)
    /// [env: ENGINETOP_MAX_THREADS; default: 128 or one per CPU if more].
    #[arg(
        long,
        value_name = "N",
        value_parser = super::numbers::max_threads(),
        allow_negative_numbers = true
    )]
    max_threads: Option<usize>,

    /// The dependency engine: naive, pooled, per-device [env: ENGINETOP_ENGINE; default:
    /// per-device].
    #[arg(long, value_name = "ENGINE", value_parser = |name: &str| name.parse::<EngineKind>())]
    engine: Option<EngineKind>,

    /// The pool kind: simple, eigen, chase-lev [env: ENGINETOP_POOL; default: eigen].
    #[arg(long, value_name = "POOL", value_parser = |name: &str| name.parse::<PoolKind>())]
    pool: Option<PoolKind>,

    /// Whether one idle worker spins before parking: on or off [env: ENGINETOP_SPIN;
    /// default: on].
    #[arg(long, value_name = "on|off", value_parser = crate::config::parse_spin_flag)]
    spin: Option<bool>,

    /// Also print the scaling simulation's predicted best inter x intra for a machine of N
    /// cores (1 to 4096), from the ops this run measured: a prediction, not a measurement.
    #[arg(
        long,
        value_name = "N",
        value_parser = super::numbers::whole(1usize, 4096),
        allow_negative_numbers = true
    )]
    cores: Option<usize>,
}

/// The shortest and longest `--budget`.
const BUDGET_SECONDS: std::ops::RangeInclusive<f64> = 1.0..=86_400.0;

fn parse_budget(text: &str) -> Result<Duration, String> {
    match text.trim().trim_end_matches('s').parse::<f64>() {
        Ok(seconds) if BUDGET_SECONDS.contains(&seconds) => Ok(Duration::from_secs_f64(seconds)),
        _ => Err("expected seconds from 1 to 86400, e.g. 60".to_string()),
    }
}

fn parse_space(text: &str) -> Result<Space, String> {
    text.parse::<Space>().map_err(|error| error.to_string())
}

/// Runs the search and prints its result.
pub(super) fn tune(args: &TuneArgs, overrides: ConfigOverrides) -> Result<()> {
    let config = RuntimeConfig::load(&ConfigOverrides {
        engine_kind: args.engine,
        pool_kind: args.pool,
        max_threads: args.max_threads,
        allow_spinning: args.spin,
        ..overrides
    })?;
    let objective = match args.objective {
        ObjectiveArg::Throughput => Objective::Throughput,
        ObjectiveArg::Latency => Objective::Latency,
    };
    let options = TuneOptions::for_config(&config, args.budget, objective, args.space)?;
    let graph = workload::load_spec(&args.workload, &workload::Overrides::from_args(&args.set)?)?;
    if args.space.rebuilds() {
        return tune_settings(args, &config, &options, &graph);
    }
    let name = graph.name.clone();
    let driver = Driver::new(graph, &config, &RunHooks::default())?;
    let handle = driver.handle();
    let live = std::io::stderr().is_terminal();
    let mut observe = |event: &ProbeEvent| {
        if live {
            show_probe("", event);
        }
    };
    let tuned = tune::tune_driver(driver, &options, &TuneStop::new(), &mut observe)?;
    if live {
        eprint!("\r\x1b[2K");
    }
    let flags = reproduce(args, &tuned.report);
    let predicted = match (args.cores, &tuned.run) {
        (Some(cores), Ok(run)) => tune::predicted_for_cores(&handle, run, cores),
        _ => None,
    };
    let text = match args.summary {
        SummaryFormat::Table => {
            let mut text = table(&name, &options, &tuned.report, &flags);
            if let Some(predicted) = &predicted {
                text.push_str(&format!("{predicted}\n"));
            }
            text
        }
        SummaryFormat::Json => {
            let mut json = tune::json(&tuned.report);
            json["workload"] = name.clone().into();
            json["flags"] = flags.clone().into();
            if let Some(predicted) = &predicted {
                json["predicted_for_cores"] = serde_json::to_value(predicted)?;
            }
            if let Ok(run) = &tuned.run {
                json["iterations"] = run.iterations.into();
                json["checksum"] = format!("{:016x}", run.checksum).into();
            }
            format!("{json:#}\n")
        }
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing to stdout")?;
    // The points measured are printed first: a run that failed mid-search keeps them.
    tuned
        .run
        .map(drop)
        .context("the workload failed while it was being tuned")
}

/// `tune` over a space with spin or pool: one run per setting, then interleaved rounds.
fn tune_settings(
    args: &TuneArgs,
    config: &RuntimeConfig,
    options: &TuneOptions,
    graph: &workload::Graph,
) -> Result<()> {
    let live = std::io::stderr().is_terminal();
    let mut observe = |setting: Setting, event: &ProbeEvent| {
        if live {
            show_probe(&format!(" {setting}"), event);
        }
    };
    let stop = TuneStop::new();
    let tuned = tune::tune_settings(graph, config, options, &stop, &mut observe)?;
    if live {
        eprint!("\r\x1b[2K");
    }
    let report = &tuned.report;
    let flags = reproduce_setting(args, report.best);
    let text = match args.summary {
        SummaryFormat::Table => format!(
            "tune: {}, {} on {} CPUs (machines shared with other work give noisy figures)\n\n{}reproduce: {flags}\n",
            graph.name,
            report.objective.as_str(),
            options.cpus,
            tune::settings_text(report),
        ),
        SummaryFormat::Json => {
            let mut json = tune::settings_json(report);
            json["workload"] = graph.name.clone().into();
            json["flags"] = flags.into();
            json["runs"] = tuned
                .runs
                .iter()
                .map(|run| {
                    let mut value = serde_json::json!({
                        "pool": run.setting.pool.as_str(),
                        "spin": run.setting.spin_flag(),
                    });
                    if let Ok(report) = &run.run {
                        value["iterations"] = report.iterations.into();
                        value["checksum"] = format!("{:016x}", report.checksum).into();
                    }
                    value
                })
                .collect();
            format!("{json:#}\n")
        }
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing to stdout")?;
    // What was measured is printed first: a run that failed mid-search keeps it.
    match tuned.runs.into_iter().find(|run| run.run.is_err()) {
        Some(failed) => Err(failed.run.unwrap_err())
            .with_context(|| format!("the workload failed while tuned with {}", failed.setting)),
        None => Ok(()),
    }
}

/// The command line that runs the workload with the best setting and counts.
fn reproduce_setting(args: &TuneArgs, best: Option<(Setting, tune::Point)>) -> String {
    let mut flags = format!("enginetop --workload {}", args.workload);
    for set in &args.set {
        flags.push_str(&format!(" --set {set}"));
    }
    if let Some((setting, point)) = best {
        flags.push_str(&format!(" --inter {} --intra {}", point.inter, point.intra));
        if let Some(engine) = args.engine {
            flags.push_str(&format!(" --engine {engine}"));
        }
        flags.push_str(&format!(
            " --pool {} --spin {}",
            setting.pool,
            setting.spin_flag()
        ));
    }
    flags
}

/// The progress line on stderr: `tuning: probe 3/12 inter 2 intra 1 ...` (`tuning pool
/// eigen spin on: ...` with a `setting` prefix).
fn show_probe(setting: &str, event: &ProbeEvent) {
    let phase = match event.phase {
        Phase::Calibrate => "calibrating",
        Phase::Scan => "scan",
        Phase::Confirm => "confirm",
        Phase::Paired => "paired with the default",
    };
    let best = event
        .best
        .map_or(String::new(), |(point, _)| format!("; best so far {point}"));
    eprint!(
        "\r\x1b[2Ktuning{setting}: probe {}/{} {} ({phase}){best}",
        event.index, event.planned, event.point
    );
    let _ = std::io::stderr().flush();
}

/// The table output: what was searched, the table, the heat map, the verdict, the flags.
fn table(name: &str, options: &TuneOptions, report: &tune::TuneReport, flags: &str) -> String {
    format!(
        "tune: {name}, {} on {} CPUs (machines shared with other work give noisy figures)\n\n{}\n{}\n{}reproduce: {flags}\n",
        report.objective.as_str(),
        options.cpus,
        tune::table(report),
        tune::heat_map(report),
        tune::text_report(report),
    )
}

/// The command line that runs the workload with the best counts.
fn reproduce(args: &TuneArgs, report: &tune::TuneReport) -> String {
    let mut flags = format!("enginetop --workload {}", args.workload);
    for set in &args.set {
        flags.push_str(&format!(" --set {set}"));
    }
    if let Some(best) = report.best {
        flags.push_str(&format!(" --inter {} --intra {}", best.inter, best.intra));
    }
    if let Some(engine) = args.engine {
        flags.push_str(&format!(" --engine {engine}"));
    }
    if let Some(pool) = args.pool {
        flags.push_str(&format!(" --pool {pool}"));
    }
    if let Some(spin) = args.spin {
        flags.push_str(if spin { " --spin on" } else { " --spin off" });
    }
    flags
}
