//! Numbers as short, fixed-width text (durations, counts, rates, elapsed time, bars), and
//! text measured, cut and wrapped in terminal cells (a wide character takes two, `…` one:
//! the measure ratatui lays out with).
#![forbid(unsafe_code)]

use std::time::Duration;

use ratatui::text::Span;

/// A duration in nanoseconds with three significant digits, at most 6 characters
/// (`812ns`, `4.20µs`, `420µs`, `1.23ms`, `123ms`, `2.50s`).
pub(crate) fn nanos(ns: f64) -> String {
    const UNITS: [(f64, &str); 3] = [(1e3, "µs"), (1e6, "ms"), (1e9, "s")];
    if ns < 999.5 {
        return format!("{:.0}ns", ns.max(0.0));
    }
    let (scale, unit) = UNITS
        .iter()
        .rev()
        .find(|(scale, _)| ns >= *scale * 0.9995)
        .copied()
        .unwrap_or(UNITS[0]);
    let value = ns / scale;
    match value {
        v if v < 9.995 => format!("{v:.2}{unit}"),
        v if v < 99.95 || (unit == "s" && v < 999.5) => format!("{v:.1}{unit}"),
        v => format!("{v:.0}{unit}"),
    }
}

/// A count with a k / M / G suffix past four digits (`999`, `12.3k`, `4.56M`).
pub(crate) fn count(n: u64) -> String {
    quantity(n as f64)
}

/// A non-negative quantity with a k / M / G suffix past four digits.
pub(crate) fn quantity(value: f64) -> String {
    if value.is_nan() || value <= 0.0 {
        return "0".into(); // an empty sum of floats is -0.0
    }
    match value {
        v if v < 10_000.0 => format!("{v:.0}"),
        v if v < 1e6 => format!("{:.1}k", v / 1e3),
        v if v < 1e9 => format!("{:.2}M", v / 1e6),
        v => format!("{:.2}G", v / 1e9),
    }
}

/// Elapsed time as `mm:ss.d`, or `h:mm:ss` past an hour.
pub(crate) fn elapsed(elapsed: Duration) -> String {
    let secs = elapsed.as_secs();
    if secs >= 3600 {
        return format!("{}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
    }
    let tenths = elapsed.subsec_millis() / 100;
    format!("{:02}:{:02}.{tenths}", secs / 60, secs % 60)
}

/// A percentage of a share in `[0, 1]`, 4 wide (` 72%`).
pub(crate) fn percent(share: f64) -> String {
    format!("{:>3.0}%", (share * 100.0).clamp(0.0, 999.0))
}

/// A bar `width` cells wide, `share` of it filled in eighths (`███▌    `).
pub(crate) fn bar(share: f64, width: usize) -> (String, String) {
    const EIGHTHS: [&str; 8] = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];
    let eighths = (share.clamp(0.0, 1.0) * (width * 8) as f64).round() as usize;
    let (full, part) = (eighths / 8, eighths % 8);
    let mut filled = "█".repeat(full);
    filled.push_str(EIGHTHS[part]);
    let used = full + usize::from(part > 0);
    (filled, " ".repeat(width.saturating_sub(used)))
}

/// A name cut to `width` cells the one way every view cuts names: its first third, `…`,
/// and the rest from its true end, where names of one family differ
/// (`s4b0_conv2_grad_in` at 14 is `s4b0…2_grad_in`, apart from `s4b0_conv1_grad_in` and
/// `s4b0_conv2_grad_w`). Under 5 cells only the start stays (`ab…`). Widths are display
/// cells: a wide character takes two and never straddles a cut, so a cut name may be a
/// cell short of `width` ([`pad_right`] fills it).
pub(crate) fn fit_name(name: &str, width: usize) -> String {
    if cells(name) <= width {
        return name.to_string();
    }
    if width < 5 {
        return fit(name, width);
    }
    let head = head_within(name, width / 3);
    let tail = tail_within(name, width - 1 - cells(head));
    format!("{head}…{tail}")
}

/// `text` padded with spaces on the right to `width` cells (as is when wider): `{:<w$}`
/// measured in cells, not characters.
pub(crate) fn pad_right(text: &str, width: usize) -> String {
    let pad = width.saturating_sub(cells(text));
    format!("{text}{}", " ".repeat(pad))
}

/// `text` padded with spaces on the left to `width` cells (as is when wider).
pub(crate) fn pad_left(text: &str, width: usize) -> String {
    let pad = width.saturating_sub(cells(text));
    format!("{}{text}", " ".repeat(pad))
}

/// The longest end of `text` that takes at most `width` cells.
fn tail_within(text: &str, width: usize) -> &str {
    let mut used = 0;
    for (index, c) in text.char_indices().rev() {
        used += cells(c.encode_utf8(&mut [0; 4]));
        if used > width {
            return &text[index + c.len_utf8()..];
        }
    }
    text
}

/// The cells `text` takes on a terminal (unicode width, as ratatui's [`Span::width`]).
pub(crate) fn cells(text: &str) -> usize {
    Span::raw(text).width()
}

/// The longest start of `text` that takes at most `width` cells.
fn head_within(text: &str, width: usize) -> &str {
    let mut used = 0;
    for (index, c) in text.char_indices() {
        used += cells(c.encode_utf8(&mut [0; 4]));
        if used > width {
            return &text[..index];
        }
    }
    text
}

/// `text` cut to `width` cells, with `…` when cut.
pub(crate) fn fit(text: &str, width: usize) -> String {
    if cells(text) <= width {
        return text.to_string();
    }
    ellipsized(text, width)
}

/// `text` cut to end in `…` within `width` cells, whether or not it fits whole (what a
/// line with more after it ends in). Nothing at width 0.
pub(crate) fn ellipsized(text: &str, width: usize) -> String {
    if width == 0 {
        return String::new();
    }
    format!("{}…", head_within(text, width - 1))
}

/// `text` in rows of at most `width` cells, broken at spaces; a word wider than a row is
/// broken where the row ends. The footer's status and the help's lines wrap with it.
pub(crate) fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut rows: Vec<String> = Vec::new();
    let mut row = String::new();
    for word in text.split(' ') {
        let needed = cells(&row) + usize::from(!row.is_empty()) + cells(word);
        if !row.is_empty() && needed > width {
            rows.push(std::mem::take(&mut row));
        }
        if !row.is_empty() {
            row.push(' ');
        }
        row.push_str(word);
        // A character wider than a row keeps a row of its own (it cannot be broken).
        while cells(&row) > width && row.chars().nth(1).is_some() {
            let head = match head_within(&row, width) {
                "" => row.chars().next().map_or("", |c| &row[..c.len_utf8()]),
                head => head,
            };
            let rest = row[head.len()..].to_string();
            rows.push(head.to_string());
            row = rest;
        }
    }
    rows.push(row);
    rows
}

/// The first `count` of `rows` (at least one), the last ending in `…` (within `width`
/// cells) when some are left out.
pub(crate) fn at_most_rows(mut rows: Vec<String>, count: usize, width: usize) -> Vec<String> {
    let count = count.max(1);
    if rows.len() > count {
        rows.truncate(count);
        rows[count - 1] = ellipsized(&rows[count - 1], width);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_counts_and_times_read_well() {
        assert_eq!(nanos(812.0), "812ns");
        assert_eq!(nanos(4_200.0), "4.20µs");
        assert_eq!(nanos(1_234_000.0), "1.23ms");
        assert_eq!(nanos(2.5e9), "2.50s");
        assert_eq!(nanos(420_000.0), "420µs");
        assert_eq!(nanos(999_999.0), "1.00ms");
        assert_eq!(nanos(123_400_000.0), "123ms");
        assert_eq!(count(999), "999");
        assert_eq!(count(12_345), "12.3k");
        assert_eq!(count(4_560_000), "4.56M");
        assert_eq!(elapsed(Duration::from_millis(72_300)), "01:12.3");
        assert_eq!(elapsed(Duration::from_secs(3_723)), "1:02:03");
        assert_eq!(percent(0.724), " 72%");
    }

    #[test]
    fn bars_fill_in_eighths_and_keep_their_width() {
        assert_eq!(bar(0.0, 4), (String::new(), "    ".into()));
        assert_eq!(bar(1.0, 4), ("████".into(), String::new()));
        assert_eq!(bar(0.5625, 4), ("██▎".into(), " ".into()));
        assert_eq!(fit("conv2d_backward", 8), "conv2d_…");
        assert_eq!(fit("relu", 8), "relu");
    }

    #[test]
    fn text_is_measured_and_cut_in_cells() {
        assert_eq!(cells("relu"), 4);
        assert_eq!(cells("数据"), 4, "wide characters take two cells");
        assert_eq!(cells("…"), 1);
        assert_eq!(fit("数据处理", 8), "数据处理");
        assert_eq!(fit("数据处理", 7), "数据处…");
        assert_eq!(
            fit("数据处理", 6),
            "数据…",
            "a wide character never straddles the end"
        );
        assert_eq!(ellipsized("ab", 2), "a…");
        assert_eq!(ellipsized("ab", 0), "");
    }

    #[test]
    fn wrap_breaks_between_words_and_inside_words_wider_than_a_row() {
        assert_eq!(
            wrap("pause / resume the workload", 12),
            ["pause /", "resume the", "workload"]
        );
        assert_eq!(wrap("inter 3 on cpu0", 40), ["inter 3 on cpu0"]);
        assert_eq!(wrap("aaa bbb ccc", 7), ["aaa bbb", "ccc"]);
        assert_eq!(wrap("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("数据 处理器", 4), ["数据", "处理", "器"]);
        assert_eq!(
            wrap("数据", 1),
            ["数", "据"],
            "a character wider than the row"
        );
    }

    #[test]
    fn rows_past_the_count_go_and_the_last_kept_ends_in_an_ellipsis() {
        let rows = wrap("aaa bbb ccc ddd", 3);
        assert_eq!(at_most_rows(rows.clone(), 2, 3), ["aaa", "bb…"]);
        assert_eq!(at_most_rows(rows.clone(), 4, 3), rows);
        assert_eq!(at_most_rows(wrap("数据 处理", 4), 1, 4), ["数…"]);
    }

    #[test]
    fn cut_names_keep_their_distinguishing_end() {
        assert_eq!(fit_name("s4b0_conv2_grad_in", 14), "s4b0…2_grad_in");
        assert_eq!(fit_name("s4b0_conv2", 14), "s4b0_conv2");
        assert_eq!(fit_name("cross_entropy", 12), "cros…entropy");
        assert_eq!(fit_name("stem_conv_grad", 4), "ste…");
        // Names of one family stay apart when cut, at every width that can tell them apart.
        let family = [
            "s4b0_conv1_grad_in",
            "s4b0_conv2_grad_in",
            "s4b0_conv2_grad_w",
            "s4b1_conv2_grad_in",
        ];
        for width in 14..18 {
            let cut: Vec<String> = family.iter().map(|n| fit_name(n, width)).collect();
            for (i, a) in cut.iter().enumerate() {
                assert!(!cut[i + 1..].contains(a), "{width}: {cut:?}");
            }
        }
        for width in 0..20 {
            let cut = fit_name("layer4_bottleneck2_conv3_backward_weights", width);
            assert_eq!(cut.chars().count(), width, "{cut}");
        }
    }

    #[test]
    fn wide_names_are_cut_in_cells_and_keep_their_true_end() {
        let name = "卷积层反向传播梯度计算_非常长的名字_106";
        assert_eq!(cells(name), 39);
        assert_eq!(fit_name(name, 39), name);
        assert_eq!(fit_name(name, 20), "卷积层…长的名字_106");
        assert_eq!(fit_name(name, 14), "卷积…名字_106");
        for width in 0..39 {
            let cut = fit_name(name, width);
            assert!(
                cells(&cut) <= width && cells(&cut) + 1 >= width,
                "{width}: {cut}"
            );
            if width >= 5 {
                let (head, tail) = cut.split_once('…').expect("a middle cut");
                assert!(
                    name.starts_with(head) && name.ends_with(tail),
                    "{width}: {cut}"
                );
            }
            if width >= 8 {
                assert!(cut.ends_with("_106"), "{width}: {cut}");
            }
        }
        // Two names of one family, apart only at the end, stay apart.
        let other = "卷积层反向传播梯度计算_非常长的名字_107";
        for width in 10..39 {
            assert_ne!(fit_name(name, width), fit_name(other, width), "{width}");
        }
    }

    #[test]
    fn padding_counts_cells() {
        assert_eq!(pad_right("数据", 6), "数据  ");
        assert_eq!(pad_left("数据", 5), " 数据");
        assert_eq!(pad_right("relu", 2), "relu");
        assert_eq!(cells(&pad_right(&fit_name("卷积层反向传播", 7), 7)), 7);
    }
}
