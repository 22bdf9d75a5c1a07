//! A tmux server of the tests' own (its own socket, killed on drop) with one 160x48 session
//! running a plain shell: the end-to-end tests drive the dashboard through it and read the
//! screen as a person would. Screen conditions are polled (tmux tells no one when a pane
//! changes) against a deadline, never a fixed sleep.
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The longest any screen condition is waited for.
pub const PATIENCE: Duration = Duration::from_secs(60);
/// How often the screen is read while waiting (tmux tells no one when a pane changes, so
/// the condition is polled).
pub const POLL: Duration = Duration::from_millis(100);
/// The shell's prompt (capture-pane drops the trailing space).
pub const PROMPT: &str = "e2e-prompt$";

/// A tmux server of our own (its own socket) with one 160x48 session running a shell.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    pub fn start(work: &Path, name: &str) -> Tmux {
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

    pub fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs")
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    pub fn screen(&self) -> String {
        self.ok(&["capture-pane", "-p", "-t", "e2e"])
    }

    /// A pane variable (`alternate_on`, `cursor_flag`, ...).
    pub fn pane(&self, variable: &str) -> String {
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
    pub fn type_text(&self, text: &str) {
        self.ok(&["send-keys", "-t", "e2e", "-l", text]);
    }

    /// Presses named keys in turn.
    pub fn keys(&self, keys: &[&str]) {
        for key in keys {
            self.key(key);
        }
    }

    /// Presses a named key (`Enter`, `Space`).
    pub fn key(&self, key: &str) {
        self.ok(&["send-keys", "-t", "e2e", key]);
    }

    /// Reads the screen until `holds` is true; fails with the last screen after
    /// [`PATIENCE`].
    pub fn wait_for(&self, what: &str, holds: impl Fn(&str) -> bool) -> String {
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

/// Whether tmux runs here (without it the end-to-end tests print why and pass).
pub fn available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|out| out.status.success())
}
