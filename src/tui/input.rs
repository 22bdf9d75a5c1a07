//! Keys to [`Action`]s, following htop / btop / tokio-console: `q` and Ctrl-C quit, `?`
//! help, space pause, Tab focus, arrows and `hjkl`. [`KEYS`] is the one list the help overlay,
//! the footer and the state tests all read.
#![forbid(unsafe_code)]

use ratatui::crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::app::{Action, Mode};

/// One line of the help: the keys as shown, what they do, the footer's short label (empty:
/// not in the footer), and every key of the line with its action (the state tests press them
/// all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KeyHelp {
    /// The keys as the help shows them.
    pub(crate) keys: &'static str,
    /// What they do.
    pub(crate) does: &'static str,
    /// The footer's hint: its keys and a short label (empty: not in the footer).
    pub(crate) hint: (&'static str, &'static str),
    /// Each key and its action (Ctrl-C, the one modified key, is tested on its own).
    pub(crate) bindings: &'static [(KeyCode, Action)],
}

const fn line(
    keys: &'static str,
    does: &'static str,
    hint: (&'static str, &'static str),
    bindings: &'static [(KeyCode, Action)],
) -> KeyHelp {
    KeyHelp {
        keys,
        does,
        hint,
        bindings,
    }
}

/// Every key, in help order (the footer shows those with a hint, in this order).
pub(crate) const KEYS: [KeyHelp; 17] = [
    line(
        "q  Ctrl-C",
        "quit",
        ("q", "quit"),
        &[(KeyCode::Char('q'), Action::Quit)],
    ),
    line(
        "?",
        "show / hide this help",
        ("?", "help"),
        &[(KeyCode::Char('?'), Action::ToggleHelp)],
    ),
    line(
        "w",
        "show / hide why it does not scale (Esc w q close)",
        ("", ""),
        &[(KeyCode::Char('w'), Action::ToggleWhy)],
    ),
    line(
        "space  f",
        "pause / resume the workload and the display (its elapsed time stops too); f: the \
         display alone",
        ("space", "pause"),
        &[
            (KeyCode::Char(' '), Action::TogglePause),
            (KeyCode::Char('f'), Action::FreezeDisplay),
        ],
    ),
    line(
        "Tab  S-Tab",
        "focus the next / previous panel",
        ("Tab", "focus"),
        &[
            (KeyCode::Tab, Action::FocusNext),
            (KeyCode::BackTab, Action::FocusPrev),
        ],
    ),
    line(
        "+  -",
        "selected device's inter-op workers +1/-1 (intra-op: threads)",
        ("+/-", "inter"),
        &[
            (KeyCode::Char('+'), Action::InterOpUp),
            (KeyCode::Char('='), Action::InterOpUp),
            (KeyCode::Char('-'), Action::InterOpDown),
        ],
    ),
    line(
        "]  [",
        "intra-op threads +1 / -1",
        ("]/[", "intra"),
        &[
            (KeyCode::Char(']'), Action::IntraOpUp),
            (KeyCode::Char('['), Action::IntraOpDown),
        ],
    ),
    line(
        "t",
        "tune: search the inter x intra counts live (t or Esc stops; then Enter keeps the \
         best, b goes back)",
        ("t", "tune"),
        &[(KeyCode::Char('t'), Action::Tune)],
    ),
    line(
        ">  <",
        "zoom the timeline in / out, 1µs to 10s a column (finer than a frame: op spans)",
        (">/<", "zoom"),
        &[
            (KeyCode::Char('>'), Action::ZoomIn),
            (KeyCode::Char('.'), Action::ZoomIn),
            (KeyCode::Char('<'), Action::ZoomOut),
            (KeyCode::Char(','), Action::ZoomOut),
        ],
    ),
    line(
        "e",
        "export the trace window as a Chrome trace (path shown below)",
        ("e", "export"),
        &[(KeyCode::Char('e'), Action::ExportTrace)],
    ),
    line(
        "r",
        "reset statistics",
        ("r", "reset"),
        &[(KeyCode::Char('r'), Action::ResetStats)],
    ),
    line(
        "/",
        "filter the ops table (Enter keeps it, Esc clears it)",
        ("/", "filter"),
        &[(KeyCode::Char('/'), Action::StartFilter)],
    ),
    line(
        "← →  h l",
        "previous / next device; ops table: sort column; timeline: op (or pan)",
        ("", ""),
        &[
            (KeyCode::Left, Action::Left),
            (KeyCode::Char('h'), Action::Left),
            (KeyCode::Right, Action::Right),
            (KeyCode::Char('l'), Action::Right),
        ],
    ),
    line(
        "↑ ↓  k j",
        "scroll the workers / this help; select an op, or the timeline's row",
        ("", ""),
        &[
            (KeyCode::Up, Action::Up),
            (KeyCode::Char('k'), Action::Up),
            (KeyCode::Down, Action::Down),
            (KeyCode::Char('j'), Action::Down),
        ],
    ),
    line(
        "PgUp PgDn",
        "a page up / down (workers, timeline, ops, this help)",
        ("", ""),
        &[
            (KeyCode::PageUp, Action::PageUp),
            (KeyCode::PageDown, Action::PageDown),
        ],
    ),
    line(
        "g G Home End L",
        "first / last row; timeline: oldest time / live edge (L too)",
        ("", ""),
        &[
            (KeyCode::Char('g'), Action::Top),
            (KeyCode::Home, Action::Top),
            (KeyCode::Char('G'), Action::Bottom),
            (KeyCode::End, Action::Bottom),
            (KeyCode::Char('L'), Action::LiveEdge),
        ],
    ),
    line(
        "i  Enter  Esc",
        "invert the ops order; open / close the timeline op's detail; clear the filter",
        ("", ""),
        &[
            (KeyCode::Char('i'), Action::InvertSort),
            (KeyCode::Enter, Action::OpenDetail),
            (KeyCode::Esc, Action::FilterCancel),
        ],
    ),
];

/// The action for terminal event `event` in `mode`, if any.
pub(crate) fn action_for(event: &Event, mode: Mode) -> Option<Action> {
    match event {
        Event::Key(key) if key.kind != KeyEventKind::Release => action_for_key(key, mode),
        _ => None,
    }
}

/// The action for key `key` in `mode`, if any.
pub(crate) fn action_for_key(key: &KeyEvent, mode: Mode) -> Option<Action> {
    let control = key.modifiers.contains(KeyModifiers::CONTROL);
    if control && key.code == KeyCode::Char('c') {
        return Some(Action::Quit);
    }
    match mode {
        Mode::Normal if !control => normal_key(key.code),
        Mode::Normal => None,
        Mode::Help => help_key(key.code),
        Mode::Filter => filter_key(key.code),
        Mode::TuneChoice => tune_choice_key(key.code),
        Mode::Why => {
            matches!(key.code, KeyCode::Esc | KeyCode::Char('w' | 'q')).then_some(Action::ToggleWhy)
        }
        Mode::Prompt => super::replay::keys::prompt_key(key.code),
    }
}

fn normal_key(code: KeyCode) -> Option<Action> {
    let action = match code {
        KeyCode::Char('q') => Action::Quit,
        KeyCode::Char('?') => Action::ToggleHelp,
        KeyCode::Char('w') => Action::ToggleWhy,
        KeyCode::Char(' ') => Action::TogglePause,
        KeyCode::Tab => Action::FocusNext,
        KeyCode::BackTab => Action::FocusPrev,
        KeyCode::Up | KeyCode::Char('k') => Action::Up,
        KeyCode::Down | KeyCode::Char('j') => Action::Down,
        KeyCode::PageUp => Action::PageUp,
        KeyCode::PageDown => Action::PageDown,
        KeyCode::Left | KeyCode::Char('h') => Action::Left,
        KeyCode::Right | KeyCode::Char('l') => Action::Right,
        KeyCode::Home | KeyCode::Char('g') => Action::Top,
        KeyCode::End | KeyCode::Char('G') => Action::Bottom,
        KeyCode::Char('+' | '=') => Action::InterOpUp,
        KeyCode::Char('-' | '_') => Action::InterOpDown,
        KeyCode::Char(']') => Action::IntraOpUp,
        KeyCode::Char('[') => Action::IntraOpDown,
        KeyCode::Char('>' | '.') => Action::ZoomIn,
        KeyCode::Char('<' | ',') => Action::ZoomOut,
        KeyCode::Char('e') => Action::ExportTrace,
        KeyCode::Char('r') => Action::ResetStats,
        KeyCode::Char('/') => Action::StartFilter,
        KeyCode::Char('i') => Action::InvertSort,
        KeyCode::Char('t') => Action::Tune,
        KeyCode::Char('f') => Action::FreezeDisplay,
        KeyCode::Char('L') => Action::LiveEdge,
        KeyCode::Enter => Action::OpenDetail,
        KeyCode::Esc => Action::FilterCancel,
        _ => return super::replay::keys::replay_key(code),
    };
    Some(action)
}

/// In the help: closing keys, and the keys that scroll it.
fn help_key(code: KeyCode) -> Option<Action> {
    let action = match code {
        KeyCode::Esc | KeyCode::Char('?' | 'q') => Action::ToggleHelp,
        KeyCode::Up | KeyCode::Char('k') => Action::Up,
        KeyCode::Down | KeyCode::Char('j') => Action::Down,
        KeyCode::PageUp => Action::PageUp,
        KeyCode::PageDown | KeyCode::Char(' ') => Action::PageDown,
        KeyCode::Home | KeyCode::Char('g') => Action::Top,
        KeyCode::End | KeyCode::Char('G') => Action::Bottom,
        _ => return None,
    };
    Some(action)
}

/// Once the search ended: keep its best, or go back.
fn tune_choice_key(code: KeyCode) -> Option<Action> {
    match code {
        KeyCode::Enter | KeyCode::Char('k') => Some(Action::TuneKeep),
        KeyCode::Esc | KeyCode::Char('b') => Some(Action::TuneBack),
        KeyCode::Char('q') => Some(Action::Quit),
        _ => None,
    }
}

fn filter_key(code: KeyCode) -> Option<Action> {
    match code {
        KeyCode::Esc => Some(Action::FilterCancel),
        KeyCode::Enter => Some(Action::FilterAccept),
        KeyCode::Backspace => Some(Action::FilterBackspace),
        KeyCode::Char(c) => Some(Action::FilterChar(c)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(code: KeyCode) -> Event {
        Event::Key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    #[test]
    fn every_key_of_every_help_line_gives_its_action() {
        for help in KEYS {
            for &(code, action) in help.bindings {
                assert_eq!(
                    action_for(&press(code), Mode::Normal),
                    Some(action),
                    "{help:?}"
                );
            }
        }
    }

    #[test]
    fn ctrl_c_quits_in_every_mode_and_releases_are_ignored() {
        let ctrl_c = Event::Key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
        for mode in [Mode::Normal, Mode::Help, Mode::Filter, Mode::TuneChoice] {
            assert_eq!(action_for(&ctrl_c, mode), Some(Action::Quit));
        }
        let mut release = KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE);
        release.kind = KeyEventKind::Release;
        assert_eq!(action_for(&Event::Key(release), Mode::Normal), None);
    }

    #[test]
    fn typing_a_filter_takes_every_character_even_q() {
        let q = press(KeyCode::Char('q'));
        assert_eq!(action_for(&q, Mode::Filter), Some(Action::FilterChar('q')));
        assert_eq!(action_for(&q, Mode::Help), Some(Action::ToggleHelp));
        let j = press(KeyCode::Char('j'));
        assert_eq!(action_for(&j, Mode::Filter), Some(Action::FilterChar('j')));
        assert_eq!(
            action_for(&press(KeyCode::Enter), Mode::Filter),
            Some(Action::FilterAccept)
        );
    }

    #[test]
    fn the_help_scrolls_with_the_keys_that_scroll_everywhere_else() {
        for (code, action) in [
            (KeyCode::Char('j'), Action::Down),
            (KeyCode::Down, Action::Down),
            (KeyCode::Char('k'), Action::Up),
            (KeyCode::Up, Action::Up),
            (KeyCode::PageDown, Action::PageDown),
            (KeyCode::PageUp, Action::PageUp),
            (KeyCode::Char('g'), Action::Top),
            (KeyCode::Char('G'), Action::Bottom),
            (KeyCode::End, Action::Bottom),
        ] {
            assert_eq!(
                action_for(&press(code), Mode::Help),
                Some(action),
                "{code:?}"
            );
        }
        assert_eq!(action_for(&press(KeyCode::Char('+')), Mode::Help), None);
    }
}
