//! The live dashboard: a terminal UI over the profiler's statistics that also retunes the
//! runtime while it runs.
//!
//! ```text
//! DashboardSource (the workload driver, or FakeSource)
//!    | snapshot(): DashboardData           ^ control(Control): resize, pause, export, reset
//!    v                                     |
//! App::observe -> History        input thread -> input::action_for -> App::update
//!    |                                     |
//!    v                                     |
//! view::draw(&App) -- header, lints, device panels, timeline, ops, sparklines, footer, help
//! ```
//! Data flows one way: the dashboard reads frames and sends [`Control`]s; the runtime never
//! calls into it. [`App`] is a pure state machine (the state tests drive it with actions),
//! the views render from it (the snapshot tests render them into ratatui's `TestBackend`),
//! and [`run`] wires both to a real terminal ([`term`] restores it on exit, error and panic).
//!
//! To show something new: put it in [`DashboardData`] (or derive it from the profiler's
//! `Snapshot` in [`panels`]), then draw it in one of the [`view`] files.
#![forbid(unsafe_code)]

pub(crate) mod app;
pub(crate) mod compare;
pub(crate) mod deps;
#[cfg(any(test, feature = "test-fakes"))]
pub(crate) mod fake;
pub(crate) mod history;
pub(crate) mod input;
pub(crate) mod lints;
pub(crate) mod live;
pub(crate) mod panels;
pub(crate) mod replay;
mod run;
pub(crate) mod source;
pub(crate) mod term;
pub(crate) mod theme;
pub(crate) mod timeline_nav;
pub(crate) mod tuner;
pub(crate) mod view;

#[cfg(all(test, not(loom)))]
mod tests;

pub(crate) use app::App;
#[cfg(any(test, feature = "test-fakes"))]
pub(crate) use fake::{FakeOptions, FakeSource};
pub(crate) use live::{LiveInfo, LiveRun};
pub(crate) use replay::ReplaySource;
pub(crate) use run::{run, RunOptions};
pub(crate) use source::DashboardSource;
#[cfg(any(test, feature = "test-fakes"))]
pub(crate) use source::{Control, ControlError, DashboardData};
pub(crate) use theme::Theme;
