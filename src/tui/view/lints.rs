//! The warnings row(s) under the header: each [`Lint`](crate::tui::lints::Lint) with the
//! number behind it, wrapped at word boundaries onto the next row when it is wider than the
//! screen (a verdict names its bound first and what would help last, so a cut line would
//! lose the answer). When the rows cannot hold every warning, the last row says how many
//! more there are.
#![forbid(unsafe_code)]

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::Ctx;

/// The most rows the warnings take, in the wide and the compact layout, and in the compact
/// one on a screen under [`SHORT`] rows (where every row goes to the panels).
const MAX_ROWS: (usize, usize, usize) = (3, 2, 1);
/// Screens with fewer rows than this give the warnings one row.
pub(crate) const SHORT: u16 = 24;
/// What starts a warning's first row.
const MARK: &str = " ⚠ ";
/// What starts the rows a warning wraps onto.
const INDENT: &str = "   ";

/// Rows the warnings take on a screen `width` x `rows`.
pub(crate) fn height(ctx: &Ctx<'_>, wide: bool, width: u16, rows: u16) -> u16 {
    let most = match (wide, rows < SHORT) {
        (true, _) => MAX_ROWS.0,
        (false, false) => MAX_ROWS.1,
        (false, true) => MAX_ROWS.2,
    };
    let wrapped: usize = ctx
        .lints
        .iter()
        .map(|lint| wrap(&lint.to_string(), usize::from(width)).len())
        .sum();
    wrapped.min(most) as u16
}

/// Draws the warnings into `area`.
pub(crate) fn draw(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>) {
    let (rows, width) = (usize::from(area.height), usize::from(area.width));
    if rows == 0 {
        return;
    }
    let mut texts: Vec<String> = Vec::new();
    let mut shown = 0;
    for lint in &ctx.lints {
        if texts.len() == rows {
            break;
        }
        let lines = wrap(&lint.to_string(), width);
        texts.extend(lines.into_iter().take(rows - texts.len()));
        shown += 1;
    }
    let hidden = ctx.lints.len() - shown;
    if let (true, Some(last)) = (hidden > 0, texts.last_mut()) {
        let more = format!("  (+{hidden} more)");
        let room = width.saturating_sub(more.chars().count());
        *last = format!("{}{more}", last.chars().take(room).collect::<String>());
    }
    let lines: Vec<Line<'_>> = texts
        .into_iter()
        .map(|text| Line::styled(text, ctx.theme.warning()))
        .collect();
    frame.render_widget(Paragraph::new(lines), area);
}

/// `text` after [`MARK`], wrapped greedily at spaces into rows of at most `width` characters,
/// the rows after the first indented by [`INDENT`] (a word longer than a row overflows it,
/// and the screen cuts it).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut rows = Vec::new();
    let mut row = MARK.to_string();
    let mut empty = true;
    for word in text.split(' ') {
        let fits = row.chars().count() + usize::from(!empty) + word.chars().count() <= width;
        if !fits && !empty {
            rows.push(std::mem::replace(&mut row, INDENT.to_string()));
            empty = true;
        }
        if !empty {
            row.push(' ');
        }
        row.push_str(word);
        empty = false;
    }
    rows.push(row);
    rows
}

#[cfg(test)]
mod tests {
    use crate::tui::fake::FakeOptions;
    use crate::tui::view::tests::{app_after, screen};

    #[test]
    fn a_short_screen_gives_the_warnings_one_row_and_says_how_many_more() {
        let app = app_after(FakeOptions::overloaded(), 60);
        let warnings = |text: &str| text.lines().filter(|l| l.contains('⚠')).count();
        let short = screen(&app, 80, 20);
        assert_eq!(warnings(&short), 1, "{short}");
        assert!(short.contains("(+2 more)"), "{short}");
        assert_eq!(warnings(&screen(&app, 80, 24)), 2);
        assert_eq!(warnings(&screen(&app, 160, 48)), 3);
    }

    #[test]
    fn a_long_warning_wraps_at_words_and_keeps_its_end() {
        let verdict = "cpu0: starved: 7% of worker time not in ops (parallelism 2.3 on \
                       2 workers); the critical path runs through write-after-read on host0; \
                       more buffers would let more ops run at once";
        let rows = super::wrap(verdict, 80);
        assert_eq!(rows.len(), 3, "{rows:#?}");
        assert!(
            rows.iter().all(|row| row.chars().count() <= 80),
            "{rows:#?}"
        );
        assert!(rows[0].starts_with(" ⚠ cpu0: starved:"), "{rows:#?}");
        assert!(rows[2].ends_with("more ops run at once"), "{rows:#?}");
        assert_eq!(
            rows.join(" ").split_whitespace().collect::<Vec<_>>()[1..].join(" "),
            verdict
        );
    }
}
