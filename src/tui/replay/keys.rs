//! The replay's keys: `x`/`X` speed, `n`/`N` step, `J` jump to a time and `o` to the next op
//! of a name (both typed in a prompt, like the `/` filter), and what the dashboard refuses
//! in a replay. The app and the input reader call in here with one line each, so a replay's
//! state stays in this module.
#![forbid(unsafe_code)]

use ratatui::crossterm::event::KeyCode;

use super::{ReplayControl, CANNOT_EXPORT, CANNOT_RESET, CANNOT_RESIZE};
use crate::tui::app::{Action, App, Mode};
use crate::tui::input::KeyHelp;
use crate::tui::source::Control;

/// What a replay key asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReplayAction {
    /// Play faster.
    Faster,
    /// Play slower.
    Slower,
    /// Step forward.
    StepForward,
    /// Step back.
    StepBack,
    /// Start typing a time to jump to.
    StartJump,
    /// Start typing an op name to jump to.
    StartNextOp,
    /// A character of the prompt.
    PromptChar(char),
    /// Delete the prompt's last character.
    PromptBackspace,
    /// Jump as typed.
    PromptAccept,
    /// Drop the prompt.
    PromptCancel,
}

/// What the prompt asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PromptKind {
    /// A time of the run (`J`).
    Time,
    /// An op name (`o`).
    OpName,
}

/// The prompt being typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Prompt {
    /// What it asks for.
    pub(crate) kind: PromptKind,
    /// What was typed.
    pub(crate) text: String,
}

impl Prompt {
    /// The prompt as the footer shows it (`jump to time (s, ms, 1m30s): 12.5`).
    pub(crate) fn line(&self) -> String {
        let asks = match self.kind {
            PromptKind::Time => "jump to time (12.5, 800ms, 1m30s)",
            PromptKind::OpName => "jump to the next op named like",
        };
        format!("{asks}: {}", self.text)
    }
}

/// The replay's lines of the help, with their keys (the tests press them all).
pub(crate) const REPLAY_KEYS: [KeyHelp; 4] = [
    KeyHelp {
        keys: "x  X",
        does: "replay: slower / faster (0.25x to 16x); space plays and pauses",
        hint: ("x/X", "speed"),
        bindings: &[
            (KeyCode::Char('x'), Action::Replay(ReplayAction::Slower)),
            (KeyCode::Char('X'), Action::Replay(ReplayAction::Faster)),
        ],
    },
    KeyHelp {
        keys: "n  N",
        does: "replay, paused: step forward / back 0.1 s x the speed",
        hint: ("n/N", "step"),
        bindings: &[
            (
                KeyCode::Char('n'),
                Action::Replay(ReplayAction::StepForward),
            ),
            (KeyCode::Char('N'), Action::Replay(ReplayAction::StepBack)),
        ],
    },
    KeyHelp {
        keys: "J",
        does: "replay: jump to a time of the run (12.5, 800ms, 1m30s; Enter jumps, Esc \
               cancels)",
        hint: ("J", "jump"),
        bindings: &[(KeyCode::Char('J'), Action::Replay(ReplayAction::StartJump))],
    },
    KeyHelp {
        keys: "o",
        does: "replay: jump to the next start of an op whose name holds the text typed \
               (searched a slice a frame; Esc cancels)",
        hint: ("o", "next op"),
        bindings: &[(
            KeyCode::Char('o'),
            Action::Replay(ReplayAction::StartNextOp),
        )],
    },
];

/// The footer's status line in a replay (when no action's outcome shows): the prompt being
/// typed, or REPLAY with the cursor, the speed and what the file lost.
pub(crate) fn footer_line(app: &App) -> Option<String> {
    let replay = app.data().facts.replay.as_ref()?;
    if let (Mode::Prompt, Some(prompt)) = (app.mode, &app.prompt) {
        return Some(format!("{}█", prompt.line()));
    }
    let mut line = format!("REPLAY {}", replay.position());
    if let Some(first) = replay.losses.first() {
        let more = replay.losses.len() - 1;
        line.push_str(&format!(" · lost: {first}"));
        if more > 0 {
            line.push_str(&format!(" (and {more} more)"));
        }
    }
    Some(line)
}

/// The action of a replay key in normal mode (keys the dashboard does not use otherwise).
pub(crate) fn replay_key(code: KeyCode) -> Option<Action> {
    REPLAY_KEYS
        .iter()
        .flat_map(|help| help.bindings)
        .find(|(key, _)| *key == code)
        .map(|&(_, action)| action)
}

/// The action of a key while the prompt is typed.
pub(crate) fn prompt_key(code: KeyCode) -> Option<Action> {
    let action = match code {
        KeyCode::Esc => ReplayAction::PromptCancel,
        KeyCode::Enter => ReplayAction::PromptAccept,
        KeyCode::Backspace => ReplayAction::PromptBackspace,
        KeyCode::Char(c) => ReplayAction::PromptChar(c),
        _ => return None,
    };
    Some(Action::Replay(action))
}

/// Whether a replay's search for the next op runs (Esc then cancels it).
pub(crate) fn searching(app: &App) -> bool {
    app.data()
        .facts
        .replay
        .as_ref()
        .is_some_and(|replay| replay.searching)
}

/// Why `action` is refused in a replay (what would change the run), if it is.
pub(crate) fn refusal(app: &App, action: Action) -> Option<String> {
    app.data().facts.replay.as_ref()?;
    match action {
        Action::InterOpUp
        | Action::InterOpDown
        | Action::IntraOpUp
        | Action::IntraOpDown
        | Action::Tune => Some(CANNOT_RESIZE.to_string()),
        Action::ExportTrace => Some(CANNOT_EXPORT.to_string()),
        Action::ResetStats => Some(CANNOT_RESET.to_string()),
        _ => None,
    }
}

/// Applies a replay key in normal mode: the control it asks for, or a prompt to type.
pub(crate) fn update(app: &mut App, action: ReplayAction) -> Option<Control> {
    if app.data().facts.replay.is_none() {
        app.fail("that key moves a replay's cursor: open one with enginetop replay FILE".into());
        return None;
    }
    let kind = match action {
        ReplayAction::Faster => return Some(Control::Replay(ReplayControl::Speed(true))),
        ReplayAction::Slower => return Some(Control::Replay(ReplayControl::Speed(false))),
        ReplayAction::StepForward => return Some(Control::Replay(ReplayControl::Step(true))),
        ReplayAction::StepBack => return Some(Control::Replay(ReplayControl::Step(false))),
        ReplayAction::StartJump => PromptKind::Time,
        ReplayAction::StartNextOp => PromptKind::OpName,
        _ => return None,
    };
    app.prompt = Some(Prompt {
        kind,
        text: String::new(),
    });
    app.mode = Mode::Prompt;
    None
}

/// Applies a key while the prompt is typed; Enter sends the jump.
pub(crate) fn update_prompt(app: &mut App, action: Action) -> Option<Control> {
    let Some(prompt) = app.prompt.as_mut() else {
        app.mode = Mode::Normal;
        return None;
    };
    match action {
        Action::Quit => app.should_quit = true,
        Action::Replay(ReplayAction::PromptChar(c)) => prompt.text.push(c),
        Action::Replay(ReplayAction::PromptBackspace) => {
            prompt.text.pop();
        }
        Action::Replay(ReplayAction::PromptCancel) => {
            app.prompt = None;
            app.mode = Mode::Normal;
        }
        Action::Replay(ReplayAction::PromptAccept) => {
            let Prompt { kind, text } = app.prompt.take()?;
            app.mode = Mode::Normal;
            let control = match kind {
                PromptKind::Time => ReplayControl::JumpTo(text),
                PromptKind::OpName => ReplayControl::NextOp(text),
            };
            return Some(Control::Replay(control));
        }
        _ => {}
    }
    None
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::tui::input::action_for;
    use crate::tui::replay::ReplayFacts;
    use crate::tui::source::DashboardData;
    use ratatui::crossterm::event::{Event, KeyEvent, KeyModifiers};

    fn press(code: KeyCode) -> Event {
        Event::Key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn replaying() -> App {
        let mut app = App::new();
        let mut data = DashboardData::default();
        data.facts.replay = Some(ReplayFacts::default());
        app.observe(data);
        app
    }

    #[test]
    fn every_replay_key_gives_its_action() {
        for help in REPLAY_KEYS {
            for &(code, action) in help.bindings {
                assert_eq!(action_for(&press(code), Mode::Normal), Some(action));
            }
        }
    }

    #[test]
    fn j_prompts_for_a_time_and_enter_jumps_there() {
        let mut app = replaying();
        let j = action_for(&press(KeyCode::Char('J')), app.mode).unwrap();
        assert_eq!(app.update(j), None);
        assert_eq!(app.mode, Mode::Prompt);
        for c in "1.5q".chars() {
            let typed = action_for(&press(KeyCode::Char(c)), app.mode).unwrap();
            app.update(typed);
        }
        app.update(action_for(&press(KeyCode::Backspace), app.mode).unwrap());
        assert_eq!(
            app.prompt.as_ref().unwrap().line(),
            "jump to time (12.5, 800ms, 1m30s): 1.5"
        );
        let enter = action_for(&press(KeyCode::Enter), app.mode).unwrap();
        let control = app.update(enter);
        assert_eq!(
            control,
            Some(Control::Replay(ReplayControl::JumpTo("1.5".into())))
        );
        assert_eq!(app.mode, Mode::Normal);
        assert!(!app.should_quit, "q was typed, not pressed");
    }

    #[test]
    fn a_replay_refuses_resizes_and_a_live_run_refuses_replay_keys() {
        let mut app = replaying();
        for key in ['+', ']', 't'] {
            let action = action_for(&press(KeyCode::Char(key)), Mode::Normal).unwrap();
            assert_eq!(app.update(action), None, "{key}");
            let status = app.status.as_ref().unwrap().text.clone();
            assert!(status.starts_with("a replay cannot resize: "), "{status}");
        }
        let mut live = App::new();
        live.observe(DashboardData::default());
        assert_eq!(live.update(Action::Replay(ReplayAction::Faster)), None);
        let status = &live.status.as_ref().unwrap().text;
        assert!(status.contains("enginetop replay FILE"), "{status}");
    }
}
