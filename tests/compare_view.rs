//! The compare view (`enginetop compare A B --view`) run by the binary over two real
//! recordings, written by the recorder from hand-made events: run B has `cv-relu` twice as
//! slow, `cv-gemm` a little slower, `cv-sgd` faster, three `cv-copy`s an iteration for A's
//! one, and 4 inter-op threads for A's 2 (`record_compare_pair`, shared with the view's unit
//! tests). Its refusals on the command line, and end to end in
//! tmux (skipped, saying why, without tmux). The view's screens and keys are tested beside it
//! (`src/tui/compare/tests.rs`).
use std::path::PathBuf;

use enginetop::record::{compare_table_names, record_compare_pair};

mod common;
use common::cli::{self, text};
use common::tmux::{available as tmux_available, Tmux, PROMPT};

/// `a.etrec` and `b.etrec`, the compare pair, in a fresh directory named for `test`.
fn recordings(test: &str) -> (PathBuf, PathBuf, PathBuf) {
    let dir = cli::scratch("compare-view", test);
    let (a, b) = record_compare_pair(&dir);
    (dir, a, b)
}

#[test]
fn the_view_needs_a_terminal_and_is_not_a_summary() {
    let (dir, _, _) = recordings("cli");
    let output = cli::run_in(&["compare", "a.etrec", "b.etrec", "--view"], &dir);
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(stderr.contains("--view needs a terminal"), "{stderr}");
    let output = cli::run_in(
        &[
            "compare",
            "a.etrec",
            "b.etrec",
            "--view",
            "--summary",
            "json",
        ],
        &dir,
    );
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains("cannot be used with"),
        "{}",
        text(&output.stderr)
    );
    // Without --view, the table as before.
    let output = cli::run_in(&["compare", "a.etrec", "b.etrec"], &dir);
    assert!(output.status.success());
    assert!(text(&output.stdout).contains("ops (largest change in total time first):"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn tmux_opens_the_view_sorts_shows_help_and_quits() {
    if !tmux_available() {
        eprintln!("skipped: tmux is not installed");
        return;
    }
    let (dir, _, _) = recordings("tmux");
    let tmux = Tmux::start(&dir, "compare-view");
    let binary = env!("CARGO_BIN_EXE_enginetop");
    tmux.type_text(&format!(
        "cd '{}' && '{binary}' compare a.etrec b.etrec --view; echo exit=$?",
        dir.display()
    ));
    tmux.key("Enter");
    let opened = tmux.wait_for("the compare view", |screen| {
        screen.contains("compare: A → B") && screen.contains("workers busy")
    });
    assert_eq!(compare_table_names(&opened)[0], "cv-relu", "{opened}");
    assert_eq!(tmux.pane("alternate_on"), "1");
    tmux.key("n");
    let by_name = tmux.wait_for("the name order", |screen| screen.contains("by name"));
    assert_eq!(compare_table_names(&by_name)[0], "cv-copy", "{by_name}");
    tmux.key("?");
    tmux.wait_for("the help", |screen| screen.contains("compare: keys"));
    tmux.key("q");
    tmux.wait_for("the help to close", |screen| {
        !screen.contains("compare: keys")
    });
    tmux.key("q");
    let after = tmux.wait_for("the shell", |screen| screen.contains("exit=0"));
    assert!(after.contains(PROMPT), "{after}");
    assert_eq!(tmux.pane("alternate_on"), "0");
    assert_eq!(tmux.pane("cursor_flag"), "1");
    drop(tmux);
    std::fs::remove_dir_all(dir).unwrap();
}
