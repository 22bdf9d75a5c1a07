//! The dashboard driven whole: the `App` fed by the `FakeSource` (or a real run and its
//! replay), pressed through the real key maps, rendered into ratatui's `TestBackend`. Screen
//! goldens live in `snapshots/` (insta; review a `.snap.new` by hand and move it over when
//! right). The binary's end-to-end runs in tmux are in `tests/tui_e2e.rs`,
//! `tests/tui_timeline_e2e.rs` and `tests/compare_view.rs`.

mod op_deps;
mod screens;
mod state;
pub(crate) mod support;
mod timeline;
