//! Drawing: one file per panel, each rendering from the [`App`] (through a [`Ctx`]) into a
//! rectangle. [`draw`] lays the screen out:
//!
//! ```text
//! header (2 rows: names, settings, throughput, PAUSED)
//! lints (0-3 rows)
//! wide (>= 120x36):  devices | ops table        compact:  selected device (tabs in title)
//!                            | sparklines                 sparklines (2 rows)
//!                    timeline (full width)                timeline | ops table
//! tuner (0-3 rows, while a search runs or waits for a choice)
//! footer (status line + key hints wrapped to the width)
//! ```
//! The op detail ([`op_detail`]) is drawn over the body while it is open, the help overlay
//! over everything when it is up. Under [`MIN`] the screen is one
//! centred line saying so instead of panels too small to read.
//!
//! Text that does not fit is never cut blindly: titles and labels drop their least important
//! parts whole and end in ` …` when they did ([`fit_parts`]), names are cut the one way [`format::fit_name`] cuts them, and
//! a panel with rows below (or above) what it shows says how many in its bottom border
//! ([`more_marker`]).
#![forbid(unsafe_code)]

pub(crate) mod device;
pub(crate) mod footer;
pub(crate) mod format;
pub(crate) mod header;
pub(crate) mod help;
pub(crate) mod lints;
pub(crate) mod op_detail;
pub(crate) mod op_spans;
pub(crate) mod ops;
pub(crate) mod scaling;
pub(crate) mod sparklines;
pub(crate) mod timeline;
pub(crate) mod tuner;

use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Paragraph, Wrap};
use ratatui::Frame;

use super::app::{App, Focus, Mode};
use super::lints::{find, Lint};
use super::panels::{device_panels, DevicePanel};
use super::theme::Theme;

/// The smallest screen that gets the wide layout.
pub(crate) const WIDE: (u16, u16) = (120, 36);

/// The smallest screen the dashboard draws panels on: the compact layout's header, a lint,
/// three worker rows, the sparklines, two timeline and two ops rows, and the footer.
pub(crate) const MIN: (u16, u16) = (60, 18);

/// What every view reads: the state, the panels of the current frame, the warnings, the
/// theme.
pub(crate) struct Ctx<'a> {
    /// The dashboard's state.
    pub(crate) app: &'a App,
    /// The device panels of the latest frame.
    pub(crate) panels: Vec<DevicePanel<'a>>,
    /// The warnings of the latest frame.
    pub(crate) lints: Vec<Lint>,
    /// Colours or not.
    pub(crate) theme: Theme,
}

impl<'a> Ctx<'a> {
    /// The context of `app`'s latest frame.
    pub(crate) fn new(app: &'a App, theme: Theme) -> Self {
        let panels = device_panels(app.data());
        let lints = find(app.data(), &panels, app.history());
        Ctx {
            app,
            panels,
            lints,
            theme,
        }
    }

    /// A bordered block titled `title`, highlighted when `focus` has the focus.
    pub(crate) fn block(&self, title: Line<'a>, focus: Focus) -> Block<'a> {
        let focused = self.app.focus == focus && self.app.mode != Mode::Help;
        panel_block(title, focused, self.theme)
    }
}

/// A bordered block titled `title`, its border highlighted when `focused`: every panel's and
/// popup's frame, in the dashboard and the compare view alike.
pub(crate) fn panel_block(title: Line<'_>, focused: bool, theme: Theme) -> Block<'_> {
    let style = if focused {
        theme.focused_border()
    } else {
        theme.border()
    };
    Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(style)
        .title(title)
        .title_style(Style::new())
}

/// A `width` x `height` popup centred in `area` (each clipped to `area`).
pub(crate) fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let [popup] = Layout::horizontal([Constraint::Length(width.min(area.width))])
        .flex(Flex::Center)
        .areas(area);
    let [popup] = Layout::vertical([Constraint::Length(height.min(area.height))])
        .flex(Flex::Center)
        .areas(popup);
    popup
}

/// Draws the whole screen.
pub(crate) fn draw(frame: &mut Frame<'_>, app: &App, theme: Theme) {
    let area = frame.area();
    if area.width < MIN.0 || area.height < MIN.1 {
        return draw_too_small(frame, area, app, theme);
    }
    let ctx = Ctx::new(app, theme);
    let wide = area.width >= WIDE.0 && area.height >= WIDE.1;
    let [header_area, lints_area, body, tuner_area, footer_area] = Layout::vertical([
        Constraint::Length(header::HEIGHT),
        Constraint::Length(lints::height(&ctx, wide, area.width, area.height)),
        Constraint::Min(0),
        Constraint::Length(tuner::height(&ctx, area.width)),
        Constraint::Length(footer::height(&ctx, area.width)),
    ])
    .areas(area);
    header::draw(frame, header_area, &ctx);
    lints::draw(frame, lints_area, &ctx);
    if app.mode == Mode::Why {
        scaling::draw(frame, body, &ctx);
    } else if wide {
        draw_wide(frame, body, &ctx);
    } else {
        draw_compact(frame, body, &ctx);
    }
    tuner::draw(frame, tuner_area, &ctx);
    footer::draw(frame, footer_area, &ctx);
    op_detail::draw(frame, body, &ctx);
    if app.mode == Mode::Help {
        help::draw(frame, area, &ctx);
    }
}

fn draw_wide(frame: &mut Frame<'_>, body: Rect, ctx: &Ctx<'_>) {
    // The devices get what they need, up to three fifths; the timeline what is left.
    let top_rows = device::stack_height(ctx).clamp(body.height * 2 / 5, body.height * 3 / 5);
    let timeline_rows = timeline::wanted_height(ctx).min(body.height - top_rows);
    let [top, timeline_area] =
        Layout::vertical([Constraint::Min(0), Constraint::Length(timeline_rows)]).areas(body);
    let [devices, right] =
        Layout::horizontal([Constraint::Percentage(56), Constraint::Percentage(44)]).areas(top);
    let [ops_area, sparks] = Layout::vertical([
        Constraint::Min(0),
        Constraint::Length(sparklines::WIDE_HEIGHT),
    ])
    .areas(right);
    device::draw_stack(frame, devices, ctx);
    ops::draw(frame, ops_area, ctx);
    sparklines::draw_wide(frame, sparks, ctx);
    timeline::draw(frame, timeline_area, ctx);
}

fn draw_compact(frame: &mut Frame<'_>, body: Rect, ctx: &Ctx<'_>) {
    let device_rows = device::wanted_height(ctx).min(body.height / 2).max(3);
    let [devices, sparks, bottom] = Layout::vertical([
        Constraint::Length(device_rows),
        Constraint::Length(sparklines::COMPACT_HEIGHT),
        Constraint::Min(0),
    ])
    .areas(body);
    let [timeline_area, ops_area] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(bottom);
    device::draw_selected(frame, devices, ctx);
    sparklines::draw_compact(frame, sparks, ctx);
    timeline::draw(frame, timeline_area, ctx);
    ops::draw(frame, ops_area, ctx);
}

/// One line, centred, in place of panels that would not fit (three short ones, wrapped,
/// when the line does not fit the width).
fn draw_too_small(frame: &mut Frame<'_>, area: Rect, app: &App, theme: Theme) {
    draw_too_small_for(frame, area, MIN, app.mode == Mode::Normal, theme);
}

/// The "terminal too small" line of a screen that needs `min` (columns, rows): `quits_on_q`
/// where q quits (in a help or a filter, q closes it or types a q; Ctrl-C always quits).
pub(crate) fn draw_too_small_for(
    frame: &mut Frame<'_>,
    area: Rect,
    min: (u16, u16),
    quits_on_q: bool,
    theme: Theme,
) {
    let quit = if quits_on_q {
        "(q quits)"
    } else {
        "(Ctrl-C quits)"
    };
    let size = format!("terminal too small: {}x{}", area.width, area.height);
    let needs = format!("needs at least {}x{}", min.0, min.1);
    let line = format!("{size}, {needs} {quit}");
    let texts = if format::cells(&line) <= usize::from(area.width) {
        vec![line]
    } else {
        vec![size, needs, quit.to_string()]
    };
    let width = usize::from(area.width.max(1));
    let rows: usize = texts.iter().map(|t| format::cells(t).div_ceil(width)).sum();
    let lines: Vec<Line<'_>> = texts
        .into_iter()
        .map(|text| Line::styled(text, theme.warning()).centered())
        .collect();
    let [middle] = Layout::vertical([Constraint::Length(rows as u16)])
        .flex(Flex::Center)
        .areas(area);
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: true }), middle);
}

/// A part of a title or label and how readily it goes (0: never; higher goes first).
pub(crate) type Part<'a> = (u8, Vec<Span<'a>>);

/// The parts that fit in `width`, in their order, dropping the most expendable first (the
/// later of two equally expendable). A line that dropped a part ends in ` …`, so nothing goes
/// unannounced. If the parts that never go are still too wide, the line is cut and ends in
/// `…`.
pub(crate) fn fit_parts(parts: Vec<Part<'_>>, width: usize) -> Line<'_> {
    let widths: Vec<usize> = parts
        .iter()
        .map(|(_, spans)| spans.iter().map(Span::width).sum())
        .collect();
    let mut kept = vec![true; parts.len()];
    let mut total: usize = widths.iter().sum();
    let mut dropped_mark = 0;
    let mut by_expendability: Vec<usize> = (0..parts.len()).rev().collect();
    by_expendability.sort_by_key(|&index| std::cmp::Reverse(parts[index].0));
    for index in by_expendability {
        if total + dropped_mark <= width || parts[index].0 == 0 {
            break;
        }
        kept[index] = false;
        total -= widths[index];
        // The marker's widest form; it is 1 cell narrower when the kept text ends in a
        // space, so at an exact fit one more part than needed may go.
        dropped_mark = format::cells(DROPPED);
    }
    let mut spans: Vec<Span<'_>> = parts
        .into_iter()
        .zip(kept)
        .filter(|(_, keep)| *keep)
        .flat_map(|((_, spans), _)| spans)
        .collect();
    if dropped_mark > 0 {
        let marker = dropped_marker(&spans);
        total += format::cells(marker);
        spans.push(Span::raw(marker));
    }
    if total <= width {
        return Line::from(spans);
    }
    Line::from(cut_spans(spans, width))
}

/// What ends a line that dropped parts.
const DROPPED: &str = " …";

/// ` …` after `spans`, or `…` when they end in a space already.
fn dropped_marker(spans: &[Span<'_>]) -> &'static str {
    let ends_in_space = spans.last().is_some_and(|s| s.content.ends_with(' '));
    if ends_in_space {
        &DROPPED[1..]
    } else {
        DROPPED
    }
}

/// `spans`, wider than `width` cells, cut to it: the first span that reaches the edge ends
/// in `…` (even when it would fit exactly, since more follow it) and the rest go. Widths are
/// display cells, as [`fit_parts`] measures them.
fn cut_spans(spans: Vec<Span<'_>>, width: usize) -> Vec<Span<'_>> {
    let mut left = width;
    let mut cut = Vec::new();
    for span in spans {
        let cells = span.width();
        if cells < left {
            left -= cells;
            cut.push(span);
            continue;
        }
        let text = format::ellipsized(&span.content, left);
        cut.push(Span::styled(text, span.style));
        break;
    }
    cut
}

/// ` ↑ 2 above · ↓ 5 more ` for a bottom border, when rows are out of sight.
pub(crate) fn more_marker<'a>(ctx: &Ctx<'_>, above: usize, below: usize) -> Option<Line<'a>> {
    let mut parts = Vec::new();
    if above > 0 {
        parts.push(format!("↑ {above} above"));
    }
    if below > 0 {
        parts.push(format!("↓ {below} more"));
    }
    if parts.is_empty() {
        return None;
    }
    let text = format!(" {} ", parts.join(" · "));
    Some(Line::styled(text, ctx.theme.key()).right_aligned())
}

/// The first row to show of `rows` in `visible` rows when `scroll` asks for it: never so far
/// that the last rows leave the bottom blank.
pub(crate) fn first_shown(scroll: usize, rows: usize, visible: usize) -> usize {
    scroll.min(rows.saturating_sub(visible))
}

#[cfg(test)]
pub(crate) mod tests {
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    use super::*;
    use crate::tui::fake::{FakeOptions, FakeSource};
    use crate::tui::source::DashboardSource;

    /// An app fed `frames` frames of a fake built with `options`.
    pub(crate) fn app_after(options: FakeOptions, frames: usize) -> App {
        let mut source = FakeSource::new(options);
        let mut app = App::new();
        for _ in 0..frames {
            app.observe(source.snapshot());
        }
        app
    }

    /// The text of a `width` x `height` buffer `draw` drew into, one line per row.
    pub(crate) fn render(
        width: u16,
        height: u16,
        draw: impl FnOnce(&mut Frame<'_>, Rect),
    ) -> String {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test backend");
        terminal
            .draw(|frame| draw(frame, frame.area()))
            .expect("draws");
        let buffer = terminal.backend().buffer();
        let mut text = String::new();
        for y in 0..height {
            for x in 0..width {
                text.push_str(buffer[(x, y)].symbol());
            }
            text.push('\n');
        }
        text
    }

    /// The whole screen at `width` x `height`.
    pub(crate) fn screen(app: &App, width: u16, height: u16) -> String {
        render(width, height, |frame, _| draw(frame, app, Theme::plain()))
    }

    #[test]
    fn under_the_minimum_one_centred_line_says_so_and_how_to_quit() {
        let app = app_after(FakeOptions::default(), 20);
        for (width, height) in [(200, 5), (30, 8), (12, 4), (59, 40), (100, 17)] {
            let text = screen(&app, width, height);
            let words: Vec<&str> = text.split_whitespace().collect();
            let joined = words.join(" ");
            let wanted = format!(
                "terminal too small: {width}x{height}, needs at least {}x{} (q quits)",
                MIN.0, MIN.1
            );
            if width >= 60 {
                assert!(joined.contains(&wanted), "{width}x{height}:\n{text}");
            } else {
                assert!(joined.starts_with("terminal too small"), "{text}");
            }
            assert!(!text.contains('╭') && !text.contains("RUNNING"), "{text}");
        }
        let text = screen(&app, 200, 5);
        let row = text.lines().position(|l| l.contains("too small")).unwrap();
        assert_eq!(row, 2, "centred vertically:\n{text}");
        let line = text.lines().nth(row).unwrap();
        let left = line.len() - line.trim_start().len();
        let right = line.chars().count() - line.trim_end().chars().count();
        assert!(left.abs_diff(right) <= 1, "centred: {line:?}");
        let fits = screen(&app, MIN.0, MIN.1);
        assert!(
            !fits.contains("too small") && fits.contains("RUNNING"),
            "{fits}"
        );
    }

    #[test]
    fn titles_drop_whole_parts_least_important_first() {
        let parts = vec![
            (0, vec![Span::raw(" gpu0")]),
            (3, vec![Span::raw(" · simulated: 1000 GFLOP/s")]),
            (1, vec![Span::raw(" · queue 15")]),
            (2, vec![Span::raw(" · 402 ops/s")]),
        ];
        let text = |line: Line<'_>| line.to_string();
        assert_eq!(text(fit_parts(parts.clone(), 80)), parts_text(&parts));
        assert_eq!(
            text(fit_parts(parts.clone(), 30)),
            " gpu0 · queue 15 · 402 ops/s …"
        );
        assert_eq!(text(fit_parts(parts.clone(), 18)), " gpu0 · queue 15 …");
        assert_eq!(text(fit_parts(parts.clone(), 17)), " gpu0 …");
        assert_eq!(text(fit_parts(parts.clone(), 7)), " gpu0 …");
        assert_eq!(text(fit_parts(parts.clone(), 6)), " gpu0…");
        assert_eq!(text(fit_parts(parts, 4)), " gp…");
        // A part that ends in a space is followed by the ellipsis alone.
        let spaced = vec![
            (0, vec![Span::raw(" ops ")]),
            (1, vec![Span::raw("· 4/4 ")]),
        ];
        assert_eq!(text(fit_parts(spaced, 8)), " ops …");
    }

    #[test]
    fn a_cut_line_counts_wide_characters_as_two_cells_and_ends_in_an_ellipsis() {
        let parts = |name: &str| {
            vec![
                (0, vec![Span::raw(format!(" {name} "))]),
                (0, vec![Span::raw("· 402 ops/s")]),
            ]
        };
        // ` 数据 ` takes 6 cells (4 characters): at 6 it reaches the edge, more follow it.
        let line = fit_parts(parts("数据"), 6);
        assert_eq!(line.to_string(), " 数据…");
        assert_eq!(line.width(), 6);
        for width in 1..20 {
            let line = fit_parts(parts("数据处理器"), width);
            assert!(line.width() <= width, "{width}: {line}");
            assert!(line.to_string().ends_with('…'), "{width}: {line}");
        }
        // A span that fills the width exactly, with more after it, still shows the cut.
        let ascii = vec![(0, vec![Span::raw("ab")]), (0, vec![Span::raw("cd")])];
        assert_eq!(fit_parts(ascii, 2).to_string(), "a…");
    }

    fn parts_text(parts: &[Part<'_>]) -> String {
        parts
            .iter()
            .flat_map(|(_, spans)| spans.iter().map(|s| s.content.to_string()))
            .collect()
    }
}
