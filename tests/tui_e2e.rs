//! End to end in a real terminal: tmux runs the real thing, `enginetop --workload
//! resnet-like` (at a small size, see [`dashboard_command`]), and the test reads the screen
//! like a person would.
//!
//! It waits (with a timeout, never a fixed sleep) for the engine's worker rows, adds an
//! inter-op worker (`+`) and an intra-op thread (`]`) and sees the new counts in the header
//! and the new worker's row, exports a trace (`e`) and validates the file named on screen,
//! pauses (space) and sees PAUSED, quits (`q`), and checks that the process exited 0, printed
//! its summary, and restored the terminal: the alternate screen is off, the cursor shows, the
//! shell prompt is back and `stty` reports canonical mode with echo. A second run with
//! `--iterations` and an idle simulated GPU checks the GPU warning in the footer, that Tab's
//! new focus shows there, and that the final numbers stay on screen until `q`. The panic test
//! drives the binary's hidden `demo` subcommand (its fake source can be made to panic). The tmux server has
//! its own socket and is killed when the test ends, pass or fail. Without tmux the tests print
//! why and pass (CI installs tmux).

use std::path::{Path, PathBuf};
use std::time::Instant;

use enginetop::profiler::validate_file;

mod common;
use common::tmux::{available as tmux_available, Tmux, PROMPT};

/// The dashboard over `enginetop demo`'s fake source (for the panic test): a hidden
/// subcommand of the real binary, built with the `test-fakes` feature that the tests turn on.
fn demo_command(traces: &Path) -> String {
    format!(
        "'{}' demo --trace-dir '{}'",
        env!("CARGO_BIN_EXE_enginetop"),
        traces.display()
    )
}

/// `enginetop --workload resnet-like`, small enough for 2 busy cores, 2 inter-op workers and
/// 1 intra-op thread, a given GEMM peak (the scratch HOME has no cached one), traces to
/// `traces`, then `extra` flags.
fn dashboard_command(traces: &Path, extra: &str) -> String {
    format!(
        "'{}' --workload resnet-like --set image=32 --set batch=1 --inter 2 --intra 1 \
         --gemm-peak 50 --trace-dir '{}' {extra}",
        env!("CARGO_BIN_EXE_enginetop"),
        traces.display()
    )
}

/// A scratch directory, a tmux session, and files where the shell leaves the command's exit
/// code and the terminal's `stty -a` after it returns.
struct Run {
    work: PathBuf,
    tmux: Tmux,
}

impl Run {
    /// Starts `command` (given the scratch directory) in a fresh session.
    fn start(name: &str, command: impl Fn(&Path) -> String) -> Run {
        let work =
            std::env::temp_dir().join(format!("enginetop-e2e-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&work).unwrap();
        let tmux = Tmux::start(&work, name);
        let run = Run { work, tmux };
        let line = format!(
            "{}; echo $? > '{}'; stty -a > '{}'",
            command(&run.work),
            run.file("exit-code").display(),
            run.file("stty").display()
        );
        run.tmux.type_text(&line);
        run.tmux.key("Enter");
        run
    }

    fn file(&self, name: &str) -> PathBuf {
        self.work.join(name)
    }

    /// Waits for the command to return; its exit code.
    fn exit_code(&self) -> String {
        let stty = self.file("stty");
        self.tmux.wait_for("the exit code and stty", |_| {
            std::fs::read_to_string(&stty).is_ok_and(|stty| !stty.is_empty())
        });
        std::fs::read_to_string(self.file("exit-code"))
            .unwrap()
            .trim()
            .to_string()
    }

    /// Checks that the terminal is back as the shell left it: canonical mode with echo,
    /// no alternate screen, a visible cursor, the prompt again.
    fn assert_terminal_restored(&self) -> String {
        let stty = std::fs::read_to_string(self.file("stty")).unwrap();
        let flags: Vec<&str> = stty.split_whitespace().collect();
        assert!(
            flags.contains(&"icanon") && flags.contains(&"echo"),
            "raw mode left on:\n{stty}"
        );
        assert_eq!(
            self.tmux.pane("alternate_on"),
            "0",
            "the alternate screen is left"
        );
        assert_eq!(self.tmux.pane("cursor_flag"), "1", "the cursor shows again");
        // The command returned (its exit code is written): the last line is a fresh prompt.
        self.tmux.wait_for("the shell prompt again", |s| {
            s.trim_end().lines().last().map(str::trim_end) == Some(PROMPT)
        })
    }

    /// Everything the pane showed, its scrollback included.
    fn history(&self) -> String {
        self.tmux
            .ok(&["capture-pane", "-p", "-S", "-", "-t", "e2e"])
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.work);
    }
}

/// The trace path in the footer's `trace written to PATH (N events)`.
fn exported_path(screen: &str) -> Option<PathBuf> {
    let rest = screen.split("trace written to ").nth(1)?;
    let path = rest.split(" (").next()?.trim();
    Some(PathBuf::from(path))
}

/// The header's `inter N` and `intra M`.
fn settings(screen: &str) -> (String, String) {
    let after = |key: &str| {
        screen
            .split(key)
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or("?")
            .to_string()
    };
    (after(" inter "), after(" intra "))
}

#[test]
fn the_dashboard_resizes_exports_pauses_and_restores_the_terminal() {
    if !tmux_available() {
        println!("skipped: tmux is not installed (apt-get install tmux); CI installs it");
        return;
    }
    let run = Run::start("keys", |work| dashboard_command(work, ""));
    let tmux = &run.tmux;
    let started = Instant::now();
    // The engine's workers, its priority pool's and the intra-op pool's each get a row.
    let rows = ["cpu0-w0", "cpu0-w1", "cpu-prio-0", "intra-w0", " inter "];
    let screen = tmux.wait_for("worker rows", |s| rows.iter().all(|row| s.contains(row)));
    println!("worker rows after {:?}", started.elapsed()); // informative, never asserted
    assert!(screen.contains("resnet-like"), "{screen}");
    assert_eq!(settings(&screen), ("2".into(), "1".into()), "{screen}");
    assert_eq!(
        tmux.pane("alternate_on"),
        "1",
        "the dashboard uses the alternate screen"
    );

    tmux.type_text("+");
    tmux.wait_for("inter 3 and the new worker's row", |s| {
        settings(s).0 == "3" && s.contains("cpu0-w2")
    });
    tmux.type_text("]");
    tmux.wait_for("intra 2", |s| settings(s).1 == "2");

    tmux.type_text("e");
    let screen = tmux.wait_for("the trace path", |s| exported_path(s).is_some());
    let trace = exported_path(&screen).unwrap();
    let summary =
        validate_file(&trace).unwrap_or_else(|problems| panic!("{}: {problems}", trace.display()));
    assert!(summary.slices > 0 && summary.tracks > 0, "{summary:?}");

    tmux.key("Space");
    tmux.wait_for("PAUSED", |s| s.contains("PAUSED"));

    tmux.type_text("q");
    assert_eq!(run.exit_code(), "0", "the dashboard exits 0");
    let screen = run.assert_terminal_restored();
    assert!(
        !screen.contains("cpu0-w0"),
        "the dashboard is gone:\n{screen}"
    );
    // Which counts the run held longest depends on when the keys landed; where it started
    // and ended does not.
    let summary = run.history();
    assert!(
        summary.contains(", 3 x 2 at the end") && summary.contains("inter x intra 2x1 0.00-"),
        "the summary reports the settings as resized:\n{summary}"
    );
}

#[test]
fn a_finished_run_keeps_its_final_numbers_until_q() {
    if !tmux_available() {
        println!("skipped: tmux is not installed (apt-get install tmux); CI installs it");
        return;
    }
    // resnet-like places no op on a GPU unless --set device=gpu:0: a simulated GPU is a
    // start-up warning in the footer.
    let run = Run::start("finish", |work| {
        dashboard_command(work, "--iterations 3 --gpus sim:1")
    });
    run.tmux.wait_for("the idle GPU warning", |s| {
        s.contains("! warning: --gpus sim:1 asked for GPUs that will sit idle")
    });
    let screen = run.tmux.wait_for("FINISHED", |s| s.contains("FINISHED"));
    assert!(screen.contains("iter 3"), "the final numbers:\n{screen}");
    run.tmux.key("Tab"); // the footer says where the focus went, over the warning or notice
    run.tmux
        .wait_for("the new focus", |s| s.contains("focus: timeline"));
    assert_eq!(run.tmux.pane("alternate_on"), "1", "still on screen");
    assert!(!run.file("exit-code").exists(), "it waits for q:\n{screen}");
    run.tmux.type_text("q");
    assert_eq!(run.exit_code(), "0");
    run.assert_terminal_restored();
    let history = run.history();
    assert!(
        history.contains("resnet-like: 3 iterations"),
        "the summary follows:\n{history}"
    );
}

#[test]
fn a_panic_restores_the_terminal_before_its_message() {
    if !tmux_available() {
        println!("skipped: tmux is not installed (apt-get install tmux); CI installs it");
        return;
    }
    let run = Run::start("panic", |work| {
        format!("{} --panic-after 1", demo_command(work))
    });
    assert_eq!(run.exit_code(), "101", "a panic exits 101");
    let screen = run.assert_terminal_restored();
    assert!(
        screen.contains("--panic-after reached"),
        "the message is readable:\n{screen}"
    );
}

/// The headline's `best inter X intra Y:` once the tuner shows one.
fn tuner_best(screen: &str) -> Option<(String, String)> {
    let rest = screen.split(" best inter ").nth(1)?;
    let mut words = rest.split_whitespace();
    let inter = words.next()?.to_string();
    (words.next()? == "intra").then_some(())?;
    let intra = words.next()?.trim_end_matches(':').to_string();
    Some((inter, intra))
}

/// `t` tunes live: a probe shows as it runs, the tuner's resizes are marked on the
/// timeline and exported as trace instants; `t` stops it and `b` goes back to the counts it
/// started from.
#[test]
fn the_tuner_probes_live_and_goes_back_when_asked() {
    if !tmux_available() {
        println!("skipped: tmux is not installed (apt-get install tmux); CI installs it");
        return;
    }
    let run = Run::start("tune-back", |work| dashboard_command(work, ""));
    let tmux = &run.tmux;
    tmux.wait_for("worker rows", |s| s.contains("cpu0-w1"));
    tmux.type_text("t");
    // On 2 CPUs the scan starts at the default, 2 x 2: the tuner resized the run.
    let screen = tmux.wait_for("a scan window at other counts", |s| {
        s.contains("tuning: window ")
            && s.contains(" scan inter ")
            && settings(s) != ("2".into(), "1".into())
    });
    println!("{screen}");
    tmux.wait_for("the resize marked on the timeline", |s| {
        s.contains("│ resize")
    });
    tmux.type_text("+");
    tmux.wait_for("+ refused while tuning", |s| {
        s.contains("the tuner is resizing the pools")
    });
    tmux.type_text("t");
    let screen = tmux.wait_for("the choice", |s| {
        s.contains("tuner stopped at window") && s.contains("b/Esc go back")
    });
    println!("{screen}");
    tmux.type_text("b");
    let screen = tmux.wait_for("the counts it started from", |s| {
        s.contains("back to: inter 2 intra 1") && settings(s) == ("2".into(), "1".into())
    });
    assert!(
        !screen.contains("tuning: window"),
        "the tuner line goes:\n{screen}"
    );
    tmux.type_text("e");
    let screen = tmux.wait_for("the trace path", |s| exported_path(s).is_some());
    let trace = exported_path(&screen).unwrap();
    validate_file(&trace).unwrap_or_else(|problems| panic!("{}: {problems}", trace.display()));
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(
        text.contains("\"resize intra-op: 1 -> 2\""),
        "the tuner's first resize is a trace instant"
    );
    tmux.type_text("q");
    assert_eq!(run.exit_code(), "0");
    run.assert_terminal_restored();
}

/// Esc stops the tuner; Enter keeps the best it found: the header shows its counts.
#[test]
fn the_tuner_keeps_its_best_when_asked() {
    if !tmux_available() {
        println!("skipped: tmux is not installed (apt-get install tmux); CI installs it");
        return;
    }
    let run = Run::start("tune-keep", |work| dashboard_command(work, ""));
    let tmux = &run.tmux;
    tmux.wait_for("worker rows", |s| s.contains("cpu0-w1"));
    tmux.type_text("t");
    // Two scan windows measured: a best among points other than the start's.
    tmux.wait_for("two points measured", |s| {
        s.lines()
            .any(|line| line.starts_with(" measured: ") && line.contains(" · "))
    });
    tmux.key("Escape");
    let screen = tmux.wait_for("the choice", |s| {
        s.contains("tuner stopped at window") && tuner_best(s).is_some()
    });
    println!("{screen}");
    let best = tuner_best(&screen).unwrap();
    tmux.key("Enter");
    let screen = tmux.wait_for("the best's counts", |s| {
        s.contains("kept the tuner's best") && settings(s) == best
    });
    println!("{screen}");
    tmux.type_text("q");
    assert_eq!(run.exit_code(), "0");
    run.assert_terminal_restored();
}

/// `w` on a real run: the scaling view replaces the panels with the run's verdict, work and
/// span, and a stacked bar per worker; `w` again brings the panels back.
#[test]
fn w_shows_why_the_run_does_not_scale() {
    if !tmux_available() {
        println!("skipped: tmux is not installed (apt-get install tmux); CI installs it");
        return;
    }
    let run = Run::start("why", |work| dashboard_command(work, ""));
    let tmux = &run.tmux;
    tmux.wait_for("worker rows", |s| s.contains("cpu0-w0"));
    tmux.type_text("w");
    let screen = tmux.wait_for("the verdict, the span and the bars", |s| {
        s.contains("why it does not scale")
            && s.contains("cpu0: ")
            && s.contains("critical path (")
            && s.contains("cpu0-w0 ")
            && s.contains("cpu0-w1 ")
    });
    assert!(screen.contains("no ready op"), "the legend:\n{screen}");
    tmux.type_text("w");
    tmux.wait_for("the panels again", |s| {
        !s.contains("why it does not scale") && s.contains("cpu0-w0")
    });
    tmux.type_text("q");
    assert_eq!(run.exit_code(), "0");
    run.assert_terminal_restored();
}
