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

pub mod app;
pub mod compare;
pub mod deps;
#[cfg(any(test, feature = "test-fakes"))]
pub mod fake;
pub mod history;
pub mod input;
pub mod lints;
pub mod live;
pub mod panels;
pub mod replay;
mod run;
pub mod source;
pub mod term;
pub mod theme;
pub mod timeline_nav;
pub mod tuner;
pub mod view;

pub use app::{Action, App};
#[cfg(any(test, feature = "test-fakes"))]
pub use fake::{FakeOptions, FakeSource, Scenario};
pub use live::{LiveInfo, LiveRun, LiveSource};
pub use replay::ReplaySource;
pub use run::{run, RunOptions, TuiError};
pub use source::{
    Control, ControlError, DashboardData, DashboardSource, DeviceKind, DeviceLayout, Facts,
    StreamLayout,
};
pub use theme::{ColorChoice, Theme};
pub use tuner::TuneControl;
