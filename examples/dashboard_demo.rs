//! The dashboard on synthetic data (`FakeSource`): for working on the dashboard without a
//! workload (`enginetop --workload NAME` shows a real run).
//!
//! ```text
//! cargo run --example dashboard_demo [-- --overloaded] [--finish-after SECONDS]
//!                                        [--trace-dir DIR] [--panic-after SECONDS]
//! ```
//! `--overloaded` makes every warning fire; `--finish-after` ends the fake workload (the
//! screen keeps its final numbers until `q`); exported traces go to `--trace-dir` (default:
//! the temporary directory); `--panic-after` panics inside the source, to check that the
//! terminal comes back. The end-to-end test (`tests/tui_e2e.rs`) drives this in tmux.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use enginetop::tui::{
    run, Control, ControlError, DashboardData, DashboardSource, FakeOptions, FakeSource, RunOptions,
};

/// The fake, made to panic after a number of snapshots.
struct PanickingSource {
    fake: FakeSource,
    panic_after: Option<u64>,
}

impl DashboardSource for PanickingSource {
    fn snapshot(&mut self) -> DashboardData {
        if self
            .panic_after
            .is_some_and(|steps| self.fake.steps() >= steps)
        {
            panic!("dashboard_demo: --panic-after reached");
        }
        self.fake.snapshot()
    }

    fn control(&mut self, control: Control) -> Result<String, ControlError> {
        self.fake.control(control)
    }
}

fn seconds_to_steps(seconds: &str, flag: &str, step: Duration) -> Result<u64> {
    let seconds: f64 = seconds
        .parse()
        .with_context(|| format!("{flag} takes seconds"))?;
    Ok((Duration::from_secs_f64(seconds).as_millis() / step.as_millis()) as u64)
}

fn source_from(mut args: impl Iterator<Item = String>) -> Result<PanickingSource> {
    let mut options = FakeOptions::default();
    let mut panic_after = None;
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().with_context(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--overloaded" => {
                options = FakeOptions {
                    trace_dir: options.trace_dir,
                    ..FakeOptions::overloaded()
                }
            }
            "--finish-after" => {
                let seconds = value("--finish-after")?;
                options.finish_after = Some(seconds_to_steps(&seconds, &arg, options.step)?);
            }
            "--panic-after" => {
                let seconds = value("--panic-after")?;
                panic_after = Some(seconds_to_steps(&seconds, &arg, options.step)?);
            }
            "--trace-dir" => options.trace_dir = PathBuf::from(value("--trace-dir")?),
            other => bail!(
                "unknown argument `{other}`: use --overloaded, --finish-after SECONDS, \
                 --trace-dir DIR, --panic-after SECONDS"
            ),
        }
    }
    Ok(PanickingSource {
        fake: FakeSource::new(options),
        panic_after,
    })
}

fn main() -> ExitCode {
    let outcome = source_from(std::env::args().skip(1))
        .and_then(|source| Ok(run(source, RunOptions::default())?));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("dashboard_demo: {error:#}");
            ExitCode::FAILURE
        }
    }
}
