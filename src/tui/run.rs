//! The dashboard's loop. One input thread reads terminal events and sends them down a
//! channel; the loop waits on that channel until the next frame is due (a deadline, so the
//! rate stays steady however many keys arrive), then takes a snapshot from the source and
//! redraws. A key is turned into an action at once, any control it asks for is sent to the
//! source, and the screen is redrawn so the answer shows without waiting for the next frame.
//! The source is only read, never waited on by the workload: the dashboard cannot slow it down
//! except by the snapshot's own cost.
#![forbid(unsafe_code)]

use std::io::IsTerminal;
// The one `std::sync` import not routed through `crate::sync`: loom has no mpsc channel, and
// this channel only carries terminal events from the input thread to the draw loop (no loom
// model covers the dashboard's I/O threads).
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event};

use super::app::App;
use super::input::action_for;
use super::source::DashboardSource;
use super::term::{DashboardTerminal, TerminalGuard};
use super::theme::Theme;
use super::view;
use crate::sync::thread::{self, JoinHandle};
use crate::sync::{Arc, AtomicBool, Ordering};

/// How the dashboard runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RunOptions {
    /// Frames per second (snapshots taken and screens drawn).
    pub(crate) fps: u32,
}

impl Default for RunOptions {
    /// 10 frames a second, colour unless `NO_COLOR`.
    fn default() -> Self {
        RunOptions { fps: 10 }
    }
}

/// Why the dashboard could not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TuiError {
    /// Standard output is not a terminal.
    #[error("the dashboard needs a terminal, but standard output is not one; run it in a terminal, or use a headless command")]
    NotATerminal,
    /// Raw mode or the alternate screen could not be set up.
    #[error("could not set up the terminal for the dashboard: {0}")]
    Setup(std::io::Error),
    /// Drawing failed (the terminal went away).
    #[error("could not draw the dashboard: {0}")]
    Draw(std::io::Error),
    /// Reading keys failed.
    #[error("could not read keys from the terminal: {0}")]
    Input(std::io::Error),
    /// The input thread could not be started.
    #[error("could not start the `tui-input` thread: {0}")]
    Spawn(std::io::Error),
}

/// What the input thread sends.
enum Message {
    Event(Event),
    Failed(std::io::Error),
}

/// Runs the dashboard on `source` until the user quits (`q`, Ctrl-C). The terminal is
/// restored on return, on error and on panic. `enginetop demo` (the `test-fakes` feature)
/// runs it over the fake source.
pub(crate) fn run(mut source: impl DashboardSource, options: RunOptions) -> Result<(), TuiError> {
    if !std::io::stdout().is_terminal() {
        return Err(TuiError::NotATerminal);
    }
    let theme = Theme::from_env();
    let mut guard = TerminalGuard::enter().map_err(TuiError::Setup)?;
    let (sender, receiver) = mpsc::channel();
    let input = InputThread::spawn(sender)?;
    let result = event_loop(guard.terminal(), &mut source, &receiver, options, theme);
    drop(input);
    drop(guard);
    result
}

fn event_loop(
    terminal: &mut DashboardTerminal,
    source: &mut impl DashboardSource,
    receiver: &Receiver<Message>,
    options: RunOptions,
    theme: Theme,
) -> Result<(), TuiError> {
    let frame = Duration::from_secs(1) / options.fps.clamp(1, 120);
    let mut app = App::new();
    let mut next_frame = Instant::now();
    while !app.should_quit {
        if Instant::now() >= next_frame {
            if app.is_finished() {
                app.tick(); // the final frame stays; status messages still expire
            } else {
                app.observe(source.snapshot());
            }
            // Also once finished: a search the run's end cut short still reports.
            app.observe_tuner(source.tuner());
            draw(terminal, &app, theme)?;
            next_frame = (next_frame + frame).max(Instant::now());
        }
        let wait = next_frame.saturating_duration_since(Instant::now());
        match receiver.recv_timeout(wait) {
            Ok(Message::Event(event)) => {
                handle(&mut app, source, &event);
                draw(terminal, &app, theme)?;
            }
            Ok(Message::Failed(error)) => return Err(TuiError::Input(error)),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    Ok(())
}

/// Applies one terminal event: its action, and the control the action asks for.
fn handle(app: &mut App, source: &mut impl DashboardSource, event: &Event) {
    let Some(action) = action_for(event, app.mode) else {
        return;
    };
    if let Some(control) = app.update(action) {
        let outcome = source.control(control.clone());
        app.control_done(&control, outcome);
    }
}

fn draw(terminal: &mut DashboardTerminal, app: &App, theme: Theme) -> Result<(), TuiError> {
    terminal
        .draw(|frame| view::draw(frame, app, theme))
        .map(|_| ())
        .map_err(TuiError::Draw)
}

/// The `tui-input` thread; stopped and joined on drop.
struct InputThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

/// How often the input thread checks whether it should stop.
const INPUT_POLL: Duration = Duration::from_millis(50);

impl InputThread {
    fn spawn(sender: Sender<Message>) -> Result<InputThread, TuiError> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let handle = thread::Builder::new()
            .name("tui-input".into())
            .spawn(move || read_events(&sender, &stopping))
            .map_err(TuiError::Spawn)?;
        Ok(InputThread {
            stop,
            handle: Some(handle),
        })
    }
}

fn read_events(sender: &Sender<Message>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let message = match event::poll(INPUT_POLL) {
            Ok(false) => continue,
            Ok(true) => event::read().map_or_else(Message::Failed, Message::Event),
            Err(error) => Message::Failed(error),
        };
        let failed = matches!(message, Message::Failed(_));
        if sender.send(message).is_err() || failed {
            return;
        }
    }
}

impl Drop for InputThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}
