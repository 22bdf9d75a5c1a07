//! End to end in a real terminal: tmux runs the dashboard (today the `dashboard_demo`
//! example over the `FakeSource`; `enginetop --workload resnet-like` once the driver lands,
//! see [`dashboard_command`]), and the test reads the screen like a person would.
//!
//! It waits (with a timeout, never a fixed sleep) for worker rows, adds an inter-op worker
//! (`+`) and an intra-op thread (`]`) and sees the new counts in the header, exports a trace
//! (`e`) and validates the file named on screen, pauses (space) and sees PAUSED, quits (`q`),
//! and checks that the process exited 0 and the terminal was restored: the alternate screen
//! is off, the cursor shows, the shell prompt is back and `stty` reports canonical mode with
//! echo. The tmux server has its own socket and is killed when the test ends, pass or fail.
//! Without tmux the test prints why and passes (CI installs tmux).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use enginetop::profiler::validate::validate_file;

/// The longest any screen condition is waited for.
const PATIENCE: Duration = Duration::from_secs(60);
/// How often the screen is read while waiting.
const POLL: Duration = Duration::from_millis(100);
/// The shell's prompt (capture-pane drops the trailing space).
const PROMPT: &str = "e2e-prompt$";

/// A tmux server of our own (its own socket) with one 160x48 session running a shell.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(work: &Path, name: &str) -> Tmux {
        let tmux = Tmux {
            socket: format!("enginetop-e2e-{name}-{}", std::process::id()),
        };
        let shell = format!(
            "env -i PATH=/usr/bin:/bin TERM=xterm-256color PS1='{PROMPT} ' HOME={} sh",
            work.display()
        );
        tmux.ok(&[
            "new-session",
            "-d",
            "-x",
            "160",
            "-y",
            "48",
            "-s",
            "e2e",
            &shell,
        ]);
        tmux.wait_for("the shell prompt", |screen| screen.contains(PROMPT));
        tmux
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs")
    }

    fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.ok(&["capture-pane", "-p", "-t", "e2e"])
    }

    /// A pane variable (`alternate_on`, `cursor_flag`, ...).
    fn pane(&self, variable: &str) -> String {
        self.ok(&[
            "display-message",
            "-p",
            "-t",
            "e2e",
            &format!("#{{{variable}}}"),
        ])
        .trim()
        .to_string()
    }

    /// Types `text` literally.
    fn type_text(&self, text: &str) {
        self.ok(&["send-keys", "-t", "e2e", "-l", text]);
    }

    /// Presses a named key (`Enter`, `Space`).
    fn key(&self, key: &str) {
        self.ok(&["send-keys", "-t", "e2e", key]);
    }

    /// Reads the screen until `holds` is true; fails with the last screen after
    /// [`PATIENCE`].
    fn wait_for(&self, what: &str, holds: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if holds(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "timed out waiting for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(POLL);
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

fn tmux_available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|out| out.status.success())
}

/// `target/<profile>/examples/dashboard_demo`, next to this test's own binary, brought up
/// to date by cargo first (a no-op after a plain `cargo test`, which builds the examples; a
/// filtered run would otherwise find a stale one, or none).
fn demo_binary() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("the test binary's path");
            let profile_dir = exe
                .parent()
                .and_then(Path::parent)
                .expect("target/<profile>/deps");
            let mut build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
            build.args(["build", "--quiet", "--example", "dashboard_demo"]);
            if profile_dir.ends_with("release") {
                build.arg("--release");
            }
            let status = build.status().expect("cargo runs");
            let binary = profile_dir.join("examples").join("dashboard_demo");
            assert!(
                status.success() && binary.exists(),
                "could not build {}",
                binary.display()
            );
            binary
        })
        .clone()
}

/// The command the test drives. When the workload driver lands, this becomes
/// `enginetop --workload resnet-like` (with its trace directory flag).
fn dashboard_command(traces: &Path) -> String {
    format!(
        "'{}' --trace-dir '{}'",
        demo_binary().display(),
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
        self.tmux.wait_for("the shell prompt again", |s| {
            s.lines().filter(|line| line.starts_with(PROMPT)).count() >= 2
        })
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
    let run = Run::start("keys", dashboard_command);
    let tmux = &run.tmux;
    let screen = tmux.wait_for("worker rows", |s| {
        s.contains("cpu0-w0") && s.contains(" inter ")
    });
    assert_eq!(settings(&screen), ("4".into(), "2".into()), "{screen}");
    assert_eq!(
        tmux.pane("alternate_on"),
        "1",
        "the dashboard uses the alternate screen"
    );

    tmux.type_text("+");
    tmux.wait_for("inter 5", |s| settings(s).0 == "5");
    tmux.type_text("]");
    let screen = tmux.wait_for("intra 3", |s| settings(s).1 == "3");
    assert!(
        screen.contains("cpu0-w4"),
        "the new worker has a row:\n{screen}"
    );

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
}

#[test]
fn a_panic_restores_the_terminal_before_its_message() {
    if !tmux_available() {
        println!("skipped: tmux is not installed (apt-get install tmux); CI installs it");
        return;
    }
    let run = Run::start("panic", |work| {
        format!("{} --panic-after 1", dashboard_command(work))
    });
    assert_eq!(run.exit_code(), "101", "a panic exits 101");
    let screen = run.assert_terminal_restored();
    assert!(
        screen.contains("--panic-after reached"),
        "the message is readable:\n{screen}"
    );
}
