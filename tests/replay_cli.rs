//! `enginetop replay FILE` end to end through the binary: the replay's final summary is the
//! live run's (every field that comes from events), a cut-off recording replays its prefix
//! and says what it lost, a file that is not a recording is refused clearly, and in a real
//! terminal (tmux) the replay pauses, steps, jumps and shows its cursor move.
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

mod common;
use common::cli::{self, text};
use common::tmux::{Tmux, PROMPT};

fn scratch(name: &str) -> PathBuf {
    cli::scratch("replay-cli", name)
}

fn enginetop(args: &[&str], dir: &Path) -> Output {
    cli::run_in(args, dir)
}

fn succeeded(output: &Output) -> String {
    assert!(output.status.success(), "{}", text(&output.stderr));
    text(&output.stdout)
}

/// A small resnet-like run of `length` (`--iterations N`, `--duration S`) recorded to
/// `r.etrec` in `dir`; its `--summary json`.
fn record_run(dir: &Path, length: [&str; 2]) -> Value {
    let run = [
        "--workload",
        "resnet-like",
        "--set",
        "image=32",
        "--set",
        "width=4",
        "--set",
        "blocks1=1",
        "--set",
        "blocks2=1",
        "--set",
        "blocks3=1",
        "--set",
        "blocks4=1",
        length[0],
        length[1],
        "--headless",
        "--gemm-peak",
        "100",
        "--profile-rows",
        "0",
        "--summary",
        "json",
        "--record",
        "r.etrec",
    ];
    serde_json::from_str(&succeeded(&enginetop(&run, dir))).unwrap()
}

/// The operator rows by name, with every figure.
fn operators(profiler: &Value) -> Vec<(String, Value)> {
    let mut rows: Vec<(String, Value)> = profiler["operators"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| (row["name"].as_str().unwrap().to_string(), row.clone()))
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    rows
}

#[test]
fn the_replay_ends_with_the_live_runs_summary_and_a_cut_file_with_its_prefix() {
    let dir = scratch("summary");
    let live = record_run(&dir, ["--iterations", "4"]);
    let replayed = enginetop(&["replay", "r.etrec", "--summary", "json"], &dir);
    let replayed: Value = serde_json::from_str(&succeeded(&replayed)).unwrap();
    assert_eq!(replayed["complete"], true, "{replayed}");
    assert_eq!(replayed["losses"].as_array().unwrap().len(), 0);
    let (live_rows, replay_rows) = (
        operators(&live["profiler"]),
        operators(&replayed["profiler"]),
    );
    assert!(live_rows.len() > 3, "{live_rows:?}");
    assert_eq!(replay_rows, live_rows);
    let ops: u64 = replay_rows
        .iter()
        .map(|(_, row)| row["count"].as_u64().unwrap())
        .sum();

    let bytes = std::fs::read(dir.join("r.etrec")).unwrap();
    std::fs::write(dir.join("cut.etrec"), &bytes[..bytes.len() / 2]).unwrap();
    let cut = enginetop(&["replay", "cut.etrec", "--summary", "json"], &dir);
    let cut: Value = serde_json::from_str(&succeeded(&cut)).unwrap();
    assert_eq!(cut["complete"], false);
    let losses = cut["losses"].to_string();
    assert!(losses.contains("no end frame"), "{losses}");
    let cut_ops: u64 = operators(&cut["profiler"])
        .iter()
        .map(|(_, row)| row["count"].as_u64().unwrap())
        .sum();
    assert!(cut_ops < ops, "{cut_ops} of {ops}");
    let table = enginetop(&["replay", "cut.etrec", "--summary", "text"], &dir);
    let table = succeeded(&table);
    assert!(
        table.contains("lost: the recording has no end frame"),
        "{table}"
    );
    assert!(table.contains("Profile Statistics"), "{table}");

    std::fs::write(dir.join("notes.txt"), "not a recording").unwrap();
    let refused = enginetop(&["replay", "notes.txt", "--summary", "json"], &dir);
    assert!(!refused.status.success());
    let stderr = text(&refused.stderr);
    assert!(stderr.contains("is not an enginetop recording"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The cursor the header shows: `0.100 s / 1.000 s · 1x · paused` gives 0.1.
fn cursor(screen: &str) -> Option<f64> {
    let words: Vec<&str> = screen.split_whitespace().collect();
    words
        .windows(3)
        .find(|w| w[1] == "s" && w[2] == "/" && w[0].parse::<f64>().is_ok())
        .and_then(|w| w[0].parse().ok())
}

#[test]
fn a_replay_in_a_terminal_pauses_steps_and_jumps() {
    if !common::tmux::available() {
        eprintln!("tmux is not installed: the replay's terminal test is skipped");
        return;
    }
    let dir = scratch("e2e");
    let live = record_run(&dir, ["--duration", "1"]);
    let tmux = Tmux::start(&dir, "replay");
    let line = format!(
        "'{}' replay '{}' --at 0.01",
        env!("CARGO_BIN_EXE_enginetop"),
        dir.join("r.etrec").display()
    );
    tmux.ok(&["send-keys", "-t", "e2e", "-l", &line]);
    tmux.keys(&["Enter"]);
    // `--at` moves the statistics frame by frame: the first frames may show them on the way.
    let screen = tmux.wait_for("the paused replay at --at", |s| {
        s.contains("paused") && cursor(s) == Some(0.01) && !s.contains("seeking")
    });
    assert!(screen.contains(" REPLAY "), "{screen}");
    // Keys that would change the run are neither marked nor offered.
    for live_only in ["+/-", "t tune", "]/[", "r reset", "e export"] {
        assert!(!screen.contains(live_only), "{live_only}: {screen}");
    }
    tmux.keys(&["n"]);
    tmux.wait_for("a step forward", |s| cursor(s) == Some(0.11));
    tmux.keys(&["N"]);
    tmux.wait_for("a step back", |s| cursor(s) == Some(0.01));
    tmux.keys(&["x", "n"]);
    tmux.wait_for("a step at 0.5x", |s| cursor(s) == Some(0.06));
    tmux.keys(&["J"]);
    tmux.wait_for("the jump prompt", |s| s.contains("jump to time"));
    tmux.ok(&["send-keys", "-t", "e2e", "-l", "0.005"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the jump", |s| cursor(s) == Some(0.005));
    tmux.keys(&["+"]);
    tmux.wait_for("the refused resize", |s| {
        s.contains("a replay cannot resize")
    });
    // At the end the header counts the live run's iterations and shows its inter-op pool.
    tmux.keys(&["J"]);
    tmux.wait_for("the jump prompt", |s| s.contains("jump to time"));
    tmux.ok(&["send-keys", "-t", "e2e", "-l", "1000"]);
    tmux.keys(&["Enter"]);
    let iterations = format!(" iter {} ", live["iterations"]);
    let inter = format!(" inter {} (cpu0)", live["inter"]);
    let end = tmux.wait_for("the end", |s| s.contains(&iterations));
    assert!(end.contains(&inter), "{inter}: {end}");
    tmux.keys(&["Space"]);
    let playing = tmux.wait_for("playing", |s| cursor(s).is_some_and(|at| at > 0.005));
    assert!(
        playing.contains("playing") || playing.contains("paused"),
        "{playing}"
    );
    tmux.keys(&["q"]);
    tmux.wait_for("the shell again", |s| s.trim_end().ends_with(PROMPT));
    let _ = std::fs::remove_dir_all(&dir);
}
