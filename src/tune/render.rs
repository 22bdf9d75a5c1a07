//! A [`TuneReport`] for people (a table, a heat map, the verdict) and for programs (JSON).
#![forbid(unsafe_code)]

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde_json::json;

use super::paired::PairedResult;
use super::search::{Gain, Outcome, PointResult, TuneReport};
use super::space::Objective;

mod settings;
pub(crate) use settings::{settings_json, settings_text};

/// Shades from worst to best.
const SHADES: [char; 5] = ['·', '░', '▒', '▓', '█'];

/// A figure in the objective's unit, to three significant digits or so.
fn figure(report: &TuneReport, value: f64) -> String {
    shown(report.objective, value)
}

/// `value` in `objective`'s unit, to three significant digits or so.
fn shown(objective: Objective, value: f64) -> String {
    let value = objective.shown(value);
    match value.abs() {
        v if v >= 100.0 => format!("{value:.0}"),
        v if v >= 10.0 => format!("{value:.1}"),
        _ => format!("{value:.2}"),
    }
}

/// Every point: counts, median, spread, windows; `*` marks the pick, `d` the default.
pub(crate) fn table(report: &TuneReport) -> String {
    let mut out = format!(
        "{:>5} {:>5}  {:>12}  {:>7}  {:>7}\n",
        "inter",
        "intra",
        report.objective.unit(),
        "spread",
        "windows"
    );
    for result in &report.points {
        let mark = match (
            Some(result.point) == report.best,
            result.point == report.default,
        ) {
            (true, true) => "* d",
            (true, false) => "*",
            (false, true) => "  d",
            (false, false) => "",
        };
        let line = format!(
            "{:>5} {:>5}  {:>12}  {:>6.1}%  {:>7}  {mark}",
            result.point.inter,
            result.point.intra,
            figure(report, result.median),
            result.relative_spread() * 100.0,
            result.samples.len(),
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

/// The surface: inter down, intra across, each cell shaded by its median (darker is better)
/// and labelled with it.
pub(crate) fn heat_map(report: &TuneReport) -> String {
    format!("{}\n{}", heat_map_title(report.objective), surface(report))
}

fn heat_map_title(objective: Objective) -> String {
    format!(
        "{} by inter-op (down) and intra-op (across); darker is better",
        objective.unit()
    )
}

/// The heat map's grid, without its title.
fn surface(report: &TuneReport) -> String {
    let inters: BTreeSet<usize> = report.points.iter().map(|r| r.point.inter).collect();
    let intras: BTreeSet<usize> = report.points.iter().map(|r| r.point.intra).collect();
    let medians = report.points.iter().map(|r| r.median);
    let (low, high) = medians.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), m| {
        (lo.min(m), hi.max(m))
    });
    let shade = |result: &PointResult| -> char {
        let span = high - low;
        let mut goodness = if span > 0.0 {
            (result.median - low) / span
        } else {
            1.0
        };
        if !report.objective.better(high, low) {
            goodness = 1.0 - goodness; // latency: the lowest is the best
        }
        SHADES[((goodness * (SHADES.len() - 1) as f64).round() as usize).min(SHADES.len() - 1)]
    };
    let mut out = format!("{:9}", "");
    for intra in &intras {
        let _ = write!(out, "{:>10}", format!("intra {intra}"));
    }
    out.push('\n');
    for &inter in &inters {
        let _ = write!(out, "{:9}", format!("inter {inter}"));
        for &intra in &intras {
            let cell = report
                .points
                .iter()
                .find(|r| r.point.inter == inter && r.point.intra == intra);
            let text = match cell {
                Some(result) => {
                    let s = shade(result);
                    format!("{s}{s} {}", figure(report, result.median))
                }
                None => "-".to_string(),
            };
            let _ = write!(out, "{text:>10}");
        }
        out.push('\n');
    }
    out
}

/// The verdict: how it was measured, the best, the default, the gain, how it ended.
pub(crate) fn text_report(report: &TuneReport) -> String {
    let mut out = String::new();
    if let Some(basis) = report.basis {
        let _ = writeln!(
            out,
            "measured: {} windows of {} ms ({}), medians of interleaved windows, {:.1} s of \
             a {:.0} s budget",
            report.points.iter().map(|r| r.samples.len()).sum::<usize>(),
            report.window.as_millis(),
            basis.as_str(),
            report.elapsed.as_secs_f64(),
            report.budget.as_secs_f64(),
        );
    }
    let unit = report.objective.unit();
    let describe = |label: &str, result: Option<&PointResult>, point| match result {
        Some(r) => format!(
            "{label}{point}: {} {unit} ± {:.1}% ({} windows)",
            figure(report, r.median),
            r.relative_spread() * 100.0,
            r.samples.len()
        ),
        None => format!("{label}{point}: not measured"),
    };
    match report.best {
        Some(best) => {
            let _ = writeln!(out, "{}", describe("best:    ", report.point(best), best));
        }
        None => out.push_str("best:    none (nothing was measured)\n"),
    }
    let default = report.default;
    let _ = writeln!(
        out,
        "{}",
        describe("default: ", report.point(default), default)
    );
    for paired in &report.paired {
        let picked = report.best == Some(paired.point);
        out.push_str(&paired_line(&paired.point.to_string(), paired, picked));
    }
    if let Some(gain) = report.gain {
        out.push_str(&gain_line(&gain));
    }
    out.push_str(&outcome_line(&report.outcome));
    out
}

/// A challenger's pairs against the default, as a line: its median ratio ± paired spread,
/// the pairs, the verdict, and whether it was kept.
fn paired_line(label: &str, paired: &PairedResult, picked: bool) -> String {
    let outcome = match picked {
        true => "kept",
        false => "not kept",
    };
    format!(
        "paired:  {label}: {:+.1}% ± {:.1}% against the default, median of {} alternating \
         pairs: {} ({outcome})\n",
        (paired.ratio - 1.0) * 100.0,
        paired.spread * 100.0,
        paired.ratios.len(),
        paired.verdict.as_str(),
    )
}

/// The gain line: the pick over the default, or that the pick is the default.
fn gain_line(gain: &Gain) -> String {
    match *gain == Gain::NONE {
        true => "gain:    none: the pick is the default\n".to_string(),
        false => format!(
            "gain:    {:+.1}% ± {:.1}% over the default{}\n",
            (gain.ratio - 1.0) * 100.0,
            gain.spread * 100.0,
            gain.note()
        ),
    }
}

/// The gain as JSON: `ratio`, `spread`, `percent`, `pairs` (0: unpaired, or the default).
fn gain_json(gain: &Gain) -> serde_json::Value {
    json!({
        "ratio": gain.ratio,
        "spread": gain.spread,
        "percent": (gain.ratio - 1.0) * 100.0,
        "pairs": gain.pairs,
    })
}

/// How a search ended, as a line (empty when it ran its course).
fn outcome_line(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Finished => String::new(),
        Outcome::Stopped => "stopped early: these are the points measured so far\n".to_string(),
        Outcome::Ended(reason) => {
            format!("ended early ({reason}): these are the points measured so far\n")
        }
    }
}

/// How a search ended, as JSON.
fn outcome_json(outcome: &Outcome) -> serde_json::Value {
    match outcome {
        Outcome::Finished => json!({ "ended": "finished" }),
        Outcome::Stopped => json!({ "ended": "stopped" }),
        Outcome::Ended(reason) => json!({ "ended": "early", "reason": reason }),
    }
}

/// The objective's unit in JSON (step times in seconds).
fn json_unit(objective: Objective) -> &'static str {
    match objective {
        Objective::Throughput => "iterations/s",
        Objective::Latency => "s/step",
    }
}

/// The report as JSON: `best` and `default` (`inter`, `intra`, `median`, `spread`,
/// `samples`), `gain` (`ratio`, `spread`, `percent`, `pairs`), `points`, `paired` (each
/// challenger's `inter`, `intra`, `ratio`, `spread`, `ratios`, `verdict`), and how it was
/// measured.
pub(crate) fn json(report: &TuneReport) -> serde_json::Value {
    let point = |point| {
        let result = report.point(point);
        json!({
            "inter": point.inter,
            "intra": point.intra,
            "median": result.map(|r| r.median),
            "spread": result.map(|r| r.spread),
            "samples": result.map_or(0, |r| r.samples.len()),
        })
    };
    json!({
        "objective": report.objective,
        "unit": json_unit(report.objective),
        "basis": report.basis,
        "window_ms": report.window.as_secs_f64() * 1e3,
        "budget_s": report.budget.as_secs_f64(),
        "elapsed_s": report.elapsed.as_secs_f64(),
        "best": report.best.map(point),
        "default": point(report.default),
        "gain": report.gain.as_ref().map(gain_json),
        "points": report.points,
        "paired": report.paired,
        "outcome": outcome_json(&report.outcome),
    })
}
