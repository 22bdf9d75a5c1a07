//! `enginetop demo`: the dashboard over its deterministic fake source (`tui::fake`), for
//! working on the dashboard without a workload (`enginetop --workload NAME` shows a real
//! run). Built only with the `test-fakes` feature (`cargo run --features test-fakes -- demo`)
//! and hidden from `--help`; the end-to-end tests (`tests/tui_e2e.rs`) drive it in tmux.
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use crate::tui::{
    run, Control, ControlError, DashboardData, DashboardSource, FakeOptions, FakeSource, RunOptions,
};

#[derive(Debug, Args)]
pub(super) struct DemoArgs {
    /// Make every warning fire.
    #[arg(long)]
    overloaded: bool,
    /// End the fake workload after this many seconds (the screen keeps its final numbers
    /// until `q`).
    #[arg(long, value_name = "SECONDS", value_parser = seconds, allow_negative_numbers = true)]
    finish_after: Option<Duration>,
    /// Where exported traces go [default: the temporary directory].
    #[arg(long, value_name = "DIR")]
    trace_dir: Option<PathBuf>,
    /// Panic inside the source after this many seconds, to check that the terminal comes
    /// back.
    #[arg(long, value_name = "SECONDS", value_parser = seconds, allow_negative_numbers = true)]
    panic_after: Option<Duration>,
}

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
            panic!("demo: --panic-after reached");
        }
        self.fake.snapshot()
    }

    fn control(&mut self, control: Control) -> Result<String, ControlError> {
        self.fake.control(control)
    }
}

/// A `SECONDS` flag's value: a number of seconds from 0.
fn seconds(text: &str) -> Result<Duration, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
        .ok_or_else(|| "expected a number of seconds from 0, e.g. 2.5".to_string())
}

/// `time` as a number of the fake's steps of `step` (whole steps, rounded down).
fn steps(time: Duration, step: Duration) -> u64 {
    (time.as_nanos() / step.as_nanos().max(1)) as u64
}

/// The source `args` ask for.
fn source_from(args: &DemoArgs) -> PanickingSource {
    let mut options = if args.overloaded {
        FakeOptions::overloaded()
    } else {
        FakeOptions::default()
    };
    if let Some(dir) = &args.trace_dir {
        options.trace_dir = dir.clone();
    }
    let step = options.step;
    options.finish_after = args.finish_after.map(|time| steps(time, step));
    let panic_after = args.panic_after.map(|time| steps(time, step));
    PanickingSource {
        fake: FakeSource::new(options),
        panic_after,
    }
}

/// Runs the dashboard over the fake source `args` describe, until the user quits.
pub(super) fn run_demo(args: &DemoArgs) -> Result<()> {
    Ok(run(source_from(args), RunOptions::default())?)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn seconds_become_steps_and_a_negative_time_is_refused() {
        let step = Duration::from_millis(100);
        assert_eq!(steps(seconds("1.5").unwrap(), step), 15);
        assert_eq!(steps(seconds("0").unwrap(), step), 0);
        for bad in ["-1", "soon", "NaN"] {
            assert_eq!(
                seconds(bad),
                Err("expected a number of seconds from 0, e.g. 2.5".to_string()),
                "{bad}"
            );
        }
    }
}
