//! Helpers shared by the dashboard tests: a fake source wired to an `App` the way `run`
//! wires them, key presses through the real key map, and screens rendered into ratatui's
//! `TestBackend`.
#![allow(dead_code)]

use crate::tui::input::action_for;
use crate::tui::{view, App, DashboardSource, FakeOptions, FakeSource, Theme};
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;

/// The two sizes every screen is checked at.
pub(crate) const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

/// An `App` fed by a `FakeSource`, as `tui::run` feeds it.
pub(crate) struct Harness {
    pub(crate) app: App,
    pub(crate) source: FakeSource,
}

impl Harness {
    /// A harness over a fake built with `options`, after `frames` frames.
    pub(crate) fn new(options: FakeOptions, frames: usize) -> Harness {
        let mut harness = Harness {
            app: App::new(),
            source: FakeSource::new(options),
        };
        harness.frames(frames);
        harness
    }

    /// `count` more frames.
    pub(crate) fn frames(&mut self, count: usize) {
        for _ in 0..count {
            self.app.observe(self.source.snapshot());
        }
    }

    /// Presses `code` (no modifiers) through the key map; sends the control it asks for.
    pub(crate) fn press(&mut self, code: KeyCode) {
        self.press_key(KeyEvent::new(code, KeyModifiers::NONE));
    }

    /// Presses `key` through the key map; sends the control it asks for.
    pub(crate) fn press_key(&mut self, key: KeyEvent) {
        let Some(action) = action_for(&Event::Key(key), self.app.mode) else {
            return;
        };
        if let Some(control) = self.app.update(action) {
            let outcome = self.source.control(control.clone());
            self.app.control_done(&control, outcome);
        }
    }

    /// Types `text`, one key per character.
    pub(crate) fn type_text(&mut self, text: &str) {
        for c in text.chars() {
            self.press(KeyCode::Char(c));
        }
    }

    /// The screen at `width` x `height`, as a buffer.
    pub(crate) fn buffer(&self, width: u16, height: u16, theme: Theme) -> Buffer {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test backend");
        terminal
            .draw(|frame| view::draw(frame, &self.app, theme))
            .expect("draws");
        terminal.backend().buffer().clone()
    }

    /// The screen at `width` x `height`, as text (one line per row).
    pub(crate) fn screen(&self, width: u16, height: u16) -> String {
        text_of(&self.buffer(width, height, Theme::colored()))
    }
}

/// A buffer's text, one line per row, trailing spaces kept.
pub(crate) fn text_of(buffer: &Buffer) -> String {
    let area = buffer.area;
    let mut text = String::new();
    for y in area.top()..area.bottom() {
        for x in area.left()..area.right() {
            text.push_str(buffer[(x, y)].symbol());
        }
        text.push('\n');
    }
    text
}
