//! The compare view (`enginetop compare A B --view`): two runs' [`Comparison`] in the
//! terminal, the op that explains the change in step time first.
//!
//! ```text
//! Comparison (record::compare) -> CompareView (state: order, selection, focus, help)
//!                                       ^ keys::action_for <- terminal key events
//!                                       v
//!                                 view::draw -- header, op table, detail | workers, footer, help
//! ```
//! The comparison is computed once, by [`crate::record::compare`] (the same figures as the
//! table and the JSON); the view only orders and shows them. [`CompareView`] is a pure state
//! machine (the tests drive it with actions and render it into ratatui's `TestBackend`), and
//! [`run`] wires it to the terminal with the dashboard's [`TerminalGuard`] (restored on exit,
//! error and panic). Nothing changes while it is open, so the loop draws, then blocks on the
//! next terminal event (a key, or a resize that redraws).
//!
//! The default order is each op's contribution to the step time's change: its total time per
//! iteration, B - A, counted positive when it moved the way the step time did, so on a slower
//! run the op that slowed it most is first, on a faster one the op that sped it up most.
#![forbid(unsafe_code)]

pub(crate) mod keys;
mod panes;
pub(crate) mod state;
mod table;
mod text;
pub(crate) mod view;

use std::io::IsTerminal;

use ratatui::crossterm::event;

pub(crate) use keys::action_for;
pub(crate) use state::CompareView;

#[cfg(all(test, not(loom)))]
mod tests;

use super::run::TuiError;
use super::term::TerminalGuard;
use super::theme::Theme;
use crate::record::compare::Comparison;

/// Shows `comparison` until the user quits (`q`, Esc, Ctrl-C). The terminal is restored on
/// return, on error and on panic.
pub(crate) fn run(comparison: Comparison) -> Result<(), TuiError> {
    if !std::io::stdout().is_terminal() {
        return Err(TuiError::NotATerminal);
    }
    let theme = Theme::from_env();
    let mut view = CompareView::new(comparison);
    let mut guard = TerminalGuard::enter().map_err(TuiError::Setup)?;
    let terminal = guard.terminal();
    while !view.should_quit {
        terminal
            .draw(|frame| view::draw(frame, &view, theme))
            .map_err(TuiError::Draw)?;
        let event = event::read().map_err(TuiError::Input)?;
        if let Some(action) = action_for(&event, view.mode) {
            view.update(action);
        }
    }
    Ok(())
}
