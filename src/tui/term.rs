//! The terminal: raw mode, the alternate screen and a hidden cursor while the dashboard runs,
//! and the way back on every exit. [`TerminalGuard`] restores on drop (a normal exit or an
//! error returned through `?`); a panic hook, installed once in front of whatever hook was
//! there, restores before the panic message prints (so the message is readable) while a
//! guard is alive, and does nothing else.
#![forbid(unsafe_code)]

use std::io::{self, Stdout};
// Not through `crate::sync`: these back process-wide statics read by a panic hook, which
// need `const` constructors loom's types lack; no loom model covers the terminal.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::cursor::{Hide, Show};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::Terminal;

/// The terminal the dashboard draws on.
pub(crate) type DashboardTerminal = Terminal<CrosstermBackend<Stdout>>;

/// Whether a guard holds the terminal (the panic hook restores only then).
static IN_DASHBOARD: AtomicBool = AtomicBool::new(false);
static HOOK: Once = Once::new();

/// Puts the restoring hook in front of the current one, once per process.
fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_DASHBOARD.swap(false, Ordering::SeqCst) {
                let _ = restore();
            }
            previous(info);
        }));
    });
}

/// Holds the terminal in dashboard mode; dropping it restores the terminal.
pub(crate) struct TerminalGuard {
    terminal: DashboardTerminal,
}

impl TerminalGuard {
    /// Enters raw mode and the alternate screen, hides the cursor, and installs the
    /// restoring panic hook.
    pub(crate) fn enter() -> io::Result<TerminalGuard> {
        install_panic_hook();
        let guard = TerminalGuard {
            terminal: Terminal::new(CrosstermBackend::new(io::stdout()))?,
        };
        // From here on a failure drops the guard, which restores what was done.
        IN_DASHBOARD.store(true, Ordering::SeqCst);
        enable_raw_mode()?;
        execute!(io::stdout(), EnterAlternateScreen, Hide)?;
        let mut guard = guard;
        guard.terminal.clear()?;
        Ok(guard)
    }

    /// The terminal to draw on.
    pub(crate) fn terminal(&mut self) -> &mut DashboardTerminal {
        &mut self.terminal
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        if IN_DASHBOARD.swap(false, Ordering::SeqCst) {
            let _ = restore();
        }
    }
}

/// Leaves the alternate screen and raw mode and shows the cursor (safe to call twice).
pub(crate) fn restore() -> io::Result<()> {
    let raw = disable_raw_mode();
    execute!(io::stdout(), LeaveAlternateScreen, Show)?;
    raw
}
