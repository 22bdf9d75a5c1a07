//! The compare view's keys, following the dashboard's (`q` and Ctrl-C quit, `?` help, ← →
//! the sort column, `i` invert, Tab focus, arrows and `hjkl`, PgUp PgDn, g G). [`COMPARE_KEYS`]
//! is the one list the help overlay, the footer and the key tests read.
#![forbid(unsafe_code)]

use ratatui::crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::state::{CompareAction, Mode, SortKey};

/// One line of the help: the keys as shown, what they do, the footer's hint (empty keys: not
/// in the footer), and every key of the line with its action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CompareKeyHelp {
    /// The keys as the help shows them.
    pub(crate) keys: &'static str,
    /// What they do.
    pub(crate) does: &'static str,
    /// The footer's hint: its keys and a short label (empty: not in the footer).
    pub(crate) hint: (&'static str, &'static str),
    /// Each key and its action.
    pub(crate) bindings: &'static [(KeyCode, CompareAction)],
}

const fn line(
    keys: &'static str,
    does: &'static str,
    hint: (&'static str, &'static str),
    bindings: &'static [(KeyCode, CompareAction)],
) -> CompareKeyHelp {
    CompareKeyHelp {
        keys,
        does,
        hint,
        bindings,
    }
}

/// Every key of the compare view, in help order.
pub(crate) const COMPARE_KEYS: [CompareKeyHelp; 9] = [
    line(
        "q  Esc  Ctrl-C",
        "quit",
        ("q", "quit"),
        &[
            (KeyCode::Char('q'), CompareAction::Quit),
            (KeyCode::Esc, CompareAction::Quit),
        ],
    ),
    line(
        "?",
        "show / hide this help",
        ("?", "help"),
        &[(KeyCode::Char('?'), CompareAction::ToggleHelp)],
    ),
    line(
        "← →  h l",
        "previous / next sort key",
        ("←/→", "sort"),
        &[
            (KeyCode::Left, CompareAction::SortPrev),
            (KeyCode::Char('h'), CompareAction::SortPrev),
            (KeyCode::Right, CompareAction::SortNext),
            (KeyCode::Char('l'), CompareAction::SortNext),
        ],
    ),
    line(
        "c d r m n",
        "sort by contribution to the step change, Δ total, ratio of totals, ratio of means, \
         name",
        ("c/d/r/m/n", "sort by"),
        &[
            (
                KeyCode::Char('c'),
                CompareAction::SortBy(SortKey::Contribution),
            ),
            (KeyCode::Char('d'), CompareAction::SortBy(SortKey::Delta)),
            (KeyCode::Char('r'), CompareAction::SortBy(SortKey::Ratio)),
            (
                KeyCode::Char('m'),
                CompareAction::SortBy(SortKey::MeanRatio),
            ),
            (KeyCode::Char('n'), CompareAction::SortBy(SortKey::Name)),
        ],
    ),
    line(
        "i",
        "invert the order",
        ("i", "invert"),
        &[(KeyCode::Char('i'), CompareAction::Invert)],
    ),
    line(
        "Tab  S-Tab",
        "focus the ops / the workers",
        ("Tab", "focus"),
        &[
            (KeyCode::Tab, CompareAction::FocusNext),
            (KeyCode::BackTab, CompareAction::FocusNext),
        ],
    ),
    line(
        "↑ ↓  k j",
        "select an op (its detail shows below); scroll the workers",
        ("j/k", "select"),
        &[
            (KeyCode::Up, CompareAction::Up),
            (KeyCode::Char('k'), CompareAction::Up),
            (KeyCode::Down, CompareAction::Down),
            (KeyCode::Char('j'), CompareAction::Down),
        ],
    ),
    line(
        "PgUp PgDn",
        "a page up / down",
        ("", ""),
        &[
            (KeyCode::PageUp, CompareAction::PageUp),
            (KeyCode::PageDown, CompareAction::PageDown),
        ],
    ),
    line(
        "g G Home End",
        "first / last row",
        ("", ""),
        &[
            (KeyCode::Char('g'), CompareAction::Top),
            (KeyCode::Home, CompareAction::Top),
            (KeyCode::Char('G'), CompareAction::Bottom),
            (KeyCode::End, CompareAction::Bottom),
        ],
    ),
];

/// The action for terminal event `event` in `mode`, if any.
pub(crate) fn action_for(event: &Event, mode: Mode) -> Option<CompareAction> {
    match event {
        Event::Key(key) if key.kind != KeyEventKind::Release => action_for_key(key, mode),
        _ => None,
    }
}

/// The action for key `key` in `mode`, if any.
pub(crate) fn action_for_key(key: &KeyEvent, mode: Mode) -> Option<CompareAction> {
    let control = key.modifiers.contains(KeyModifiers::CONTROL);
    if control {
        return (key.code == KeyCode::Char('c')).then_some(CompareAction::Quit);
    }
    match mode {
        Mode::Help => help_key(key.code),
        Mode::Normal => COMPARE_KEYS
            .iter()
            .flat_map(|help| help.bindings)
            .find(|(code, _)| *code == key.code)
            .map(|&(_, action)| action),
    }
}

/// In the help: the closing keys, and the keys that scroll it.
fn help_key(code: KeyCode) -> Option<CompareAction> {
    let action = match code {
        KeyCode::Esc | KeyCode::Char('?' | 'q') => CompareAction::ToggleHelp,
        KeyCode::Up | KeyCode::Char('k') => CompareAction::Up,
        KeyCode::Down | KeyCode::Char('j') => CompareAction::Down,
        KeyCode::PageUp => CompareAction::PageUp,
        KeyCode::PageDown | KeyCode::Char(' ') => CompareAction::PageDown,
        KeyCode::Home | KeyCode::Char('g') => CompareAction::Top,
        KeyCode::End | KeyCode::Char('G') => CompareAction::Bottom,
        _ => return None,
    };
    Some(action)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn press(code: KeyCode) -> Event {
        Event::Key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    #[test]
    fn every_key_of_every_help_line_gives_its_action_and_no_key_is_bound_twice() {
        let mut seen = Vec::new();
        for help in COMPARE_KEYS {
            for &(code, action) in help.bindings {
                assert!(!seen.contains(&code), "{code:?} bound twice");
                seen.push(code);
                assert_eq!(
                    action_for(&press(code), Mode::Normal),
                    Some(action),
                    "{help:?}"
                );
            }
        }
    }

    #[test]
    fn in_the_help_the_closing_keys_close_it_and_ctrl_c_still_quits() {
        for code in [KeyCode::Esc, KeyCode::Char('?'), KeyCode::Char('q')] {
            assert_eq!(
                action_for(&press(code), Mode::Help),
                Some(CompareAction::ToggleHelp)
            );
        }
        assert_eq!(action_for(&press(KeyCode::Char('n')), Mode::Help), None);
        let ctrl_c = Event::Key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
        for mode in [Mode::Normal, Mode::Help] {
            assert_eq!(action_for(&ctrl_c, mode), Some(CompareAction::Quit));
        }
        let mut release = KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE);
        release.kind = KeyEventKind::Release;
        assert_eq!(action_for(&Event::Key(release), Mode::Normal), None);
    }
}
