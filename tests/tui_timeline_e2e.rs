//! The timeline read op by op, end to end in a real terminal: tmux runs `enginetop --workload
//! resnet-like` (small), and the test focuses the timeline (Tab), zooms in until a column is
//! finer than a frame (`>`: the title says `ops`), pauses (space: the footer says the workload
//! and the display are paused), puts the cursor on an op (←, ↓ to the next row while a row has
//! none), opens its detail (Enter) and reads the op's name and id there, and what it read,
//! wrote and waited on (the run's graph, hooked into the dashboard), closes it (Esc) and
//! quits (`q`, exit code 0). It waits on screen conditions with a timeout, never a fixed
//! sleep. Without tmux it prints why and passes (CI installs tmux).

use std::path::PathBuf;

mod common;
use common::tmux::{available as tmux_available, Tmux};

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The value on the detail's `label` row (`op id       1234` gives `1234`).
fn detail_value(screen: &str, label: &str) -> Option<String> {
    let row = screen
        .lines()
        .find(|line| line.contains(&format!(" {label}  ")))?;
    let after = row.split_once(&format!(" {label} "))?.1.trim_start();
    let value = after.split(['│', '╰']).next()?.trim_end();
    Some(value.to_string())
}

#[test]
fn an_op_picked_on_the_zoomed_paused_timeline_shows_its_name_and_id() {
    if !tmux_available() {
        eprintln!("tmux is not installed: skipping the timeline end-to-end test");
        return;
    }
    let work = std::env::temp_dir().join(format!("enginetop-e2e-timeline-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let scratch = Scratch(work);
    let tmux = Tmux::start(&scratch.0, "timeline");
    let exit_code = scratch.0.join("exit-code");
    let command = format!(
        "'{}' --workload resnet-like --set image=32 --set batch=1 --inter 2 --intra 1 \
         --gemm-peak 50 --trace-dir '{}'; echo $? > '{}'",
        env!("CARGO_BIN_EXE_enginetop"),
        scratch.0.display(),
        exit_code.display()
    );
    tmux.type_text(&command);
    tmux.key("Enter");
    tmux.wait_for("the engine's worker rows", |s| s.contains("cpu0-w0"));
    tmux.key("Tab");
    tmux.wait_for("the timeline's focus", |s| s.contains("focus: timeline"));
    for _ in 0..6 {
        tmux.type_text(">"); // 100 ms a column down to 1 ms
    }
    tmux.wait_for("op spans in the timeline", |s| {
        s.contains("timeline · ops · 1.00ms/column")
    });
    // Ops in the retained history: pause only once an iteration has finished.
    tmux.wait_for("a finished iteration", |s| {
        let iterations = s.split("· iter ").nth(1).and_then(|rest| {
            let count = rest.split_whitespace().next()?;
            count.parse::<u64>().ok()
        });
        iterations.is_some_and(|count| count >= 1)
    });
    tmux.key("Space");
    tmux.wait_for("the pause", |s| s.contains("workload and display paused"));
    let mut screen = String::new();
    for _ in 0..8 {
        tmux.key("Left");
        tmux.key("Enter");
        screen = tmux.wait_for("the op detail, or why there is none", |s| {
            s.contains(" op id  ") || s.contains("op on ") || s.contains("no op selected")
        });
        if screen.contains(" op id  ") {
            break;
        }
        tmux.key("Down"); // no op on this row: the next one
    }
    assert!(
        screen.contains(" op id  "),
        "no op to pick on any row:\n{screen}"
    );
    // A capture can catch the terminal mid-frame: wait for the detail's last row, drawn
    // up to the box's right border.
    screen = tmux.wait_for("the whole op detail", |s| {
        s.lines().any(|line| {
            line.split_once(" waited on ")
                .is_some_and(|(_, rest)| rest.contains('│'))
        })
    });
    let id = detail_value(&screen, "op id").expect("the op id row");
    let name = detail_value(&screen, "name").expect("the name row");
    assert!(id.parse::<u64>().is_ok(), "op id {id:?}:\n{screen}");
    assert!(!name.is_empty(), "an empty name:\n{screen}");
    assert!(
        screen.contains(&format!(" op {id} · {name} ")),
        "the title names the op:\n{screen}"
    );
    assert!(detail_value(&screen, "queue wait").is_some(), "{screen}");
    for row in ["reads", "writes", "waited on"] {
        let value = detail_value(&screen, row).unwrap_or_default();
        assert!(
            !value.is_empty() && value != "not recorded",
            "{row}: {value:?}\n{screen}"
        );
    }
    tmux.key("Escape");
    tmux.wait_for("the detail closed", |s| !s.contains(" op id  "));
    tmux.type_text("q");
    tmux.wait_for("the exit code", |_| {
        std::fs::read_to_string(&exit_code).is_ok_and(|code| !code.is_empty())
    });
    let code = std::fs::read_to_string(&exit_code).unwrap();
    assert_eq!(code.trim(), "0", "{}", tmux.screen());
}
