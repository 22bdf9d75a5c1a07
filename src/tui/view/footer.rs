//! The footer: a status line (the last action's outcome until it expires; else, once the
//! workload finished, a notice saying so; else what has the focus) over the key hints, both
//! wrapped to the width so none is cut (a long status takes up to [`STATUS_ROWS`] rows).
#![forbid(unsafe_code)]

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{format, Ctx};
use crate::tui::app::{focus_text, refused_when_finished, Action, Mode, PlusMinus, StatusKind};
use crate::tui::input::{KeyHelp, KEYS};
use crate::tui::replay::REPLAY_KEYS;

/// The most rows a status message takes (the rest is cut with `…`).
pub(crate) const STATUS_ROWS: usize = 3;

/// Rows the footer takes at `width`.
pub(crate) fn height(ctx: &Ctx<'_>, width: u16) -> u16 {
    (status_lines(ctx, width).len() + hint_lines(ctx, width).len()) as u16
}

/// Draws the footer into `area`.
pub(crate) fn draw(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>) {
    let mut lines = status_lines(ctx, area.width);
    lines.extend(hint_lines(ctx, area.width));
    frame.render_widget(Paragraph::new(lines), area);
}

/// What is paused, when anything is: the workload (space), the display (space or `f`), or
/// both, and what the keys do meanwhile.
fn paused_line<'a>(ctx: &Ctx<'a>, width: u16) -> Option<Line<'a>> {
    let display = ctx.app.timeline.display_paused;
    let text = match (ctx.app.paused, display) {
        (true, true) => {
            "‖ workload and display paused: the timeline pans (←/→); space resumes both"
        }
        (false, true) => {
            "‖ display paused (the workload runs on): the timeline pans (←/→); f resumes it"
        }
        (true, false) => "‖ workload paused (the display is live): space resumes it",
        (false, false) => return None,
    };
    let text = format::fit(&format!(" {text}"), usize::from(width));
    Some(Line::styled(text, ctx.theme.warning()))
}

fn status_lines<'a>(ctx: &Ctx<'a>, width: u16) -> Vec<Line<'a>> {
    let mut lines: Vec<Line<'a>> = paused_line(ctx, width).into_iter().collect();
    lines.extend(message_lines(ctx, width));
    lines
}

fn message_lines<'a>(ctx: &Ctx<'a>, width: u16) -> Vec<Line<'a>> {
    let theme = ctx.theme;
    if let Some(status) = &ctx.app.status {
        let (mark, style) = match status.kind {
            StatusKind::Info => ("✓", theme.ok()),
            StatusKind::Warning => ("! warning:", theme.warning()),
            StatusKind::Error => ("✗", theme.error()),
        };
        let text = format!("{mark} {}", status.text);
        let width = usize::from(width.max(2)) - 1;
        let rows = format::at_most_rows(format::wrap(&text, width), STATUS_ROWS, width);
        return rows
            .into_iter()
            .map(|row| Line::styled(format!(" {row}"), style))
            .collect();
    }
    if let Some(text) = crate::tui::replay::keys::footer_line(ctx.app) {
        let width = usize::from(width.max(2)) - 1;
        let rows = format::at_most_rows(format::wrap(&text, width), STATUS_ROWS, width);
        let rows = rows.into_iter();
        return rows
            .map(|row| Line::styled(format!(" {row}"), theme.strong()))
            .collect();
    }
    if ctx.app.is_finished() {
        return vec![Line::styled(
            " the workload has finished: these are its final numbers; q quits",
            theme.strong(),
        )];
    }
    let device = ctx
        .panels
        .get(ctx.app.selected_device)
        .map_or("-", |panel| panel.title());
    vec![Line::styled(
        format!(" {}", focus_text(ctx.app.focus, device)),
        theme.dim(),
    )]
}

/// The hints: every key with a footer label, `+/-` saying what those keys change now (the
/// header's answer, [`App::plus_minus`](crate::tui::app::App::plus_minus)); once the run has
/// finished, and in a replay, only the keys that still do something.
fn hints(ctx: &Ctx<'_>) -> Vec<(&'static str, String)> {
    let finished = ctx.app.is_finished();
    let refused = |help: &KeyHelp| {
        let refused = |&(_, action): &(_, Action)| {
            (finished && refused_when_finished(action).is_some())
                || crate::tui::replay::keys::refusal(ctx.app, action).is_some()
        };
        help.bindings.iter().any(refused)
    };
    let replay = ctx.app.data().facts.replay.is_some();
    let replay_keys = REPLAY_KEYS.iter().filter(|_| replay);
    KEYS.iter()
        .chain(replay_keys)
        .filter(|help| !refused(help))
        .map(|help| help.hint)
        .filter(|(keys, _)| !keys.is_empty())
        .map(|(keys, label)| match keys {
            PLUS_MINUS => (keys, plus_minus_label(ctx)),
            "t" if ctx.app.is_tuning() => (keys, "stop tuning".to_string()),
            _ => (keys, label.to_string()),
        })
        .collect()
}

/// The footer hint's keys for `+`/`-`.
const PLUS_MINUS: &str = "+/-";

/// What `+`/`-` change with the current selection, in a word or three.
fn plus_minus_label(ctx: &Ctx<'_>) -> String {
    match ctx.app.plus_minus() {
        PlusMinus::InterOp { .. } => "inter".into(),
        PlusMinus::IntraOp => "intra".into(),
        PlusMinus::Nothing {
            on: Some(device), ..
        } => format!("nothing on {device}"),
        PlusMinus::Nothing { on: None, .. } => "nothing".into(),
    }
}

fn hint_lines<'a>(ctx: &Ctx<'a>, width: u16) -> Vec<Line<'a>> {
    let hints = match ctx.app.mode {
        Mode::Filter => vec![
            ("Enter", "keep filter".into()),
            ("Esc", "clear filter".into()),
            ("Ctrl-C", "quit".into()),
        ],
        Mode::Help => vec![
            ("j/k PgDn", "scroll".into()),
            ("Esc/?/q", "close help".into()),
        ],
        Mode::TuneChoice => vec![
            ("Enter/k", "keep the best".into()),
            ("b/Esc", "go back".into()),
            ("q", "quit".into()),
        ],
        Mode::Why => vec![("Esc/w/q", "close why".into()), ("Ctrl-C", "quit".into())],
        Mode::Prompt => vec![
            ("Enter", "jump".into()),
            ("Esc", "cancel".into()),
            ("Ctrl-C", "quit".into()),
        ],
        Mode::Normal => hints(ctx),
    };
    let width = usize::from(width.max(1));
    let mut lines = Vec::new();
    let mut spans: Vec<Span<'a>> = Vec::new();
    let mut used = 0;
    for (key, label) in hints {
        let cost = 1 + format::cells(key) + 1 + format::cells(&label) + 1;
        if used > 0 && used + cost > width {
            lines.push(Line::from(std::mem::take(&mut spans)));
            used = 0;
        }
        spans.push(Span::raw(" "));
        spans.push(Span::styled(key, ctx.theme.key()));
        spans.push(Span::styled(format!(" {label} "), ctx.theme.dim()));
        used += cost;
    }
    if !spans.is_empty() {
        lines.push(Line::from(spans));
    }
    lines
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    use super::*;
    use crate::tui::app::{Action, App, STATUS_FRAMES};
    use crate::tui::source::{Control, ControlError, DashboardData};
    use crate::tui::theme::Theme;

    /// The footer at `width`, one string per row.
    fn footer_rows(app: &App, width: u16) -> Vec<String> {
        let ctx = Ctx::new(app, Theme::plain());
        let rows = height(&ctx, width);
        let mut terminal = Terminal::new(TestBackend::new(width, rows)).unwrap();
        terminal
            .draw(|frame| draw(frame, frame.area(), &ctx))
            .unwrap();
        let buffer = terminal.backend().buffer();
        let cells: Vec<&str> = buffer.content().iter().map(|cell| cell.symbol()).collect();
        cells
            .chunks(usize::from(width))
            .map(|row| row.concat().trim_end().to_string())
            .collect()
    }

    fn finished() -> DashboardData {
        let mut data = DashboardData::default();
        data.facts.finished = true;
        data.facts.elapsed = Duration::from_secs(1);
        data
    }

    #[test]
    fn a_message_gives_way_to_the_finished_notice_when_it_expires() {
        let mut app = App::new();
        app.observe(finished());
        app.update(Action::IntraOpUp);
        let refused = footer_rows(&app, 100);
        assert_eq!(
            refused[0],
            " ✗ the workload has finished: nothing to resize"
        );
        app.control_done(
            &Control::ExportTrace,
            Ok("trace written to /tmp/t.json".into()),
        );
        assert_eq!(footer_rows(&app, 100)[0], " ✓ trace written to /tmp/t.json");
        for _ in 0..STATUS_FRAMES {
            app.tick();
        }
        assert_eq!(
            footer_rows(&app, 100)[0],
            " the workload has finished: these are its final numbers; q quits"
        );
    }

    #[test]
    fn the_focus_hint_comes_back_after_a_message() {
        let mut app = App::new();
        app.observe(DashboardData::default());
        app.update(Action::ZoomOut);
        assert_eq!(
            footer_rows(&app, 100)[0],
            " ✓ timeline: 200ms a column (sampled states)"
        );
        for _ in 0..STATUS_FRAMES {
            app.observe(DashboardData::default());
        }
        assert!(footer_rows(&app, 100)[0].starts_with(" focus: devices"));
    }

    /// Tab shows the new focus at once, over a start-up warning or the finished notice.
    #[test]
    fn the_new_focus_shows_after_tab_whatever_the_status_line_held() {
        let mut data = DashboardData::default();
        data.facts.warnings = vec!["4 inter-op x 1 intra-op threads".to_string()];
        let mut app = App::new();
        app.observe(data);
        assert!(footer_rows(&app, 100)[0].starts_with(" ! warning: 4 inter-op"));
        app.update(Action::FocusNext);
        assert_eq!(
            footer_rows(&app, 100)[0],
            " ✓ focus: timeline: ←/→ op (or pan), ↑/↓ row, Enter detail, </> zoom, End live"
        );
        app.observe(finished());
        app.update(Action::FocusNext);
        assert_eq!(
            footer_rows(&app, 100)[0],
            " ✓ focus: ops: ←/→ sort column, i invert, / filter"
        );
        app.update(Action::FocusPrev);
        assert!(footer_rows(&app, 100)[0].starts_with(" ✓ focus: timeline"));
    }

    #[test]
    fn a_long_start_up_warning_wraps_over_rows() {
        let mut data = DashboardData::default();
        let warning = "inter-op threads = 4 and engine CPU workers = 2 are both set, but \
                       they are the same threads: running 4 (the inter-op count wins)";
        data.facts.warnings = vec![warning.to_string()];
        let mut app = App::new();
        app.observe(data);
        let rows = footer_rows(&app, 60);
        assert!(
            rows[0].starts_with(" ! warning: inter-op threads = 4"),
            "{rows:?}"
        );
        assert!(rows[2].ends_with("count wins)"), "{rows:?}");
        assert!(rows[3].starts_with(" q quit"), "{rows:?}");
    }

    #[test]
    fn a_status_longer_than_its_rows_is_cut_with_an_ellipsis() {
        let mut app = App::new();
        app.observe(DashboardData::default());
        let long = "trace not written: ".to_string() + &"no space left ".repeat(12);
        app.control_done(&Control::ExportTrace, Err(ControlError::Failed(long)));
        let rows = footer_rows(&app, 40);
        assert!(rows[0].starts_with(" ✗ trace not written:"), "{rows:?}");
        assert!(rows[STATUS_ROWS - 1].ends_with('…'), "{rows:?}");
        assert!(rows[STATUS_ROWS].starts_with(" q quit"), "{rows:?}");
    }

    /// The footer's `+/-` hint says what the header says those keys change.
    #[test]
    fn the_plus_minus_hint_follows_the_selected_device() {
        let mut source = crate::tui::fake::FakeSource::new(Default::default());
        let mut app = App::new();
        for _ in 0..3 {
            app.observe(crate::tui::source::DashboardSource::snapshot(&mut source));
        }
        let hint = |app: &App| footer_rows(app, 200).join("\n");
        assert!(hint(&app).contains("+/- inter "), "{}", hint(&app));
        app.update(Action::Right); // cpu1
        assert!(hint(&app).contains("+/- inter "), "{}", hint(&app));
        app.update(Action::Right); // gpu0
        assert!(
            hint(&app).contains("+/- nothing on gpu0 "),
            "{}",
            hint(&app)
        );
        app.update(Action::Right); // intra-op
        assert!(hint(&app).contains("+/- intra "), "{}", hint(&app));
        assert!(hint(&app).contains("]/[ intra "), "{}", hint(&app));
        app.observe(finished());
        let finished_hint = hint(&app);
        for refused in ["+/-", "]/[", "space", " r "] {
            assert!(!finished_hint.contains(refused), "{finished_hint}");
        }
        assert!(finished_hint.contains("e export"), "{finished_hint}");
    }
}
