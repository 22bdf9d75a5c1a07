//! A [`SettingsReport`] for people (one surface per setting, the interleaved rounds, the
//! verdict) and for programs (JSON).
#![forbid(unsafe_code)]

use std::fmt::Write as _;

use serde_json::json;

use super::{
    gain_json, gain_line, heat_map_title, json_unit, outcome_json, outcome_line, paired_line,
    shown, surface,
};
use crate::tune::rebuild::SettingsReport;
use crate::tune::search::PointResult;
use crate::tune::setting::Setting;
use crate::tune::space::Point;

/// Every setting's surface (its live search), the rounds' table, the best, the default, the
/// gain, and how it ended.
pub(crate) fn settings_text(report: &SettingsReport) -> String {
    let objective = report.objective;
    let unit = objective.unit();
    let mut out = format!(
        "one run per setting, searched live: {}\n",
        heat_map_title(objective)
    );
    for search in &report.settings {
        let live = &search.report;
        let best = match live.best.and_then(|best| live.point(best)) {
            Some(r) => format!(
                "best {} at {} {unit} ± {:.1}%",
                r.point,
                shown(objective, r.median),
                r.relative_spread() * 100.0
            ),
            None => "nothing measured".to_string(),
        };
        let _ = write!(out, "\n{}: {best}\n{}", search.setting, surface(live));
    }
    for setting in &report.skipped {
        let _ = writeln!(
            out,
            "\n{setting}: not searched (its build left too little of its share of the budget)"
        );
    }
    out.push('\n');
    out.push_str(&rounds_table(report));
    out.push_str(&verdict(report));
    out
}

/// The finalists and their interleaved figures; `*` marks the pick, `d` the default.
fn rounds_table(report: &SettingsReport) -> String {
    let objective = report.objective;
    let mut out = match report.rounds {
        0 => "no interleaved round fitted: nothing was paired with the default, so the default \
              is kept (the settings' live figures above were measured one setting after \
              another)\n"
            .to_string(),
        rounds => format!(
            "compared in {rounds} interleaved rounds, a fresh run per setting each round, a \
             warm-up window then windows of {} ms:\n",
            report.round_window.as_millis()
        ),
    };
    if report.rounds == 0 {
        return out;
    }
    let _ = writeln!(
        out,
        "{:>9} {:>4} {:>5} {:>5}  {:>12}  {:>7}  {:>6}",
        "pool",
        "spin",
        "inter",
        "intra",
        objective.unit(),
        "spread",
        "rounds"
    );
    for finalist in &report.finalists {
        let (setting, r) = (finalist.setting, &finalist.result);
        let mark = match (
            report.best == Some((setting, r.point)),
            report.default == (setting, r.point),
        ) {
            (true, true) => "* d",
            (true, false) => "*",
            (false, true) => "  d",
            (false, false) => "",
        };
        let line = format!(
            "{:>9} {:>4} {:>5} {:>5}  {:>12}  {:>6.1}%  {:>6}  {mark}",
            setting.pool.as_str(),
            setting.spin_flag(),
            r.point.inter,
            r.point.intra,
            shown(objective, r.median),
            r.relative_spread() * 100.0,
            r.samples.len(),
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out.push('\n');
    out
}

/// The best, the default, the gain, how it ended.
fn verdict(report: &SettingsReport) -> String {
    let unit = report.objective.unit();
    let describe =
        |label: &str, (setting, point): (Setting, Point)| match report.result(setting, point) {
            Some(r) => format!(
                "{label}{setting}, {point}: {} {unit} ± {:.1}% ({} windows)",
                shown(report.objective, r.median),
                r.relative_spread() * 100.0,
                r.samples.len()
            ),
            None => format!("{label}{setting}, {point}: not measured"),
        };
    let mut out = String::new();
    match report.best {
        Some(best) => {
            let _ = writeln!(out, "{}", describe("best:    ", best));
        }
        None => out.push_str("best:    none (nothing was measured)\n"),
    }
    let _ = writeln!(out, "{}", describe("default: ", report.default));
    for (setting, paired) in &report.paired {
        let picked = report.best == Some((*setting, paired.point));
        let label = format!("{setting}, {}", paired.point);
        out.push_str(&paired_line(&label, paired, picked));
    }
    if let Some(gain) = report.gain {
        out.push_str(&gain_line(&gain));
    }
    let _ = writeln!(
        out,
        "{:.1} s of a {:.0} s budget",
        report.elapsed.as_secs_f64(),
        report.budget.as_secs_f64()
    );
    out.push_str(&outcome_line(&report.outcome));
    out
}

/// A configuration and its figure as JSON.
fn configuration(
    setting: Setting,
    point: Point,
    result: Option<&PointResult>,
) -> serde_json::Value {
    json!({
        "pool": setting.pool.as_str(),
        "spin": setting.spin_flag(),
        "inter": point.inter,
        "intra": point.intra,
        "median": result.map(|r| r.median),
        "spread": result.map(|r| r.spread),
        "samples": result.map_or(0, |r| r.samples.len()),
    })
}

/// The report as JSON: `best` and `default` (`pool`, `spin`, `inter`, `intra`, `median`,
/// `spread`, `samples`), `gain`, `points` (every setting's live windows), `settings` (each
/// setting's live pick), `finalists` (the interleaved rounds' figures), `rounds`.
pub(crate) fn settings_json(report: &SettingsReport) -> serde_json::Value {
    let chosen = |(setting, point)| configuration(setting, point, report.result(setting, point));
    let points: Vec<serde_json::Value> = report
        .settings
        .iter()
        .flat_map(|search| {
            search.report.points.iter().map(move |r| {
                json!({
                    "pool": search.setting.pool.as_str(),
                    "spin": search.setting.spin_flag(),
                    "inter": r.point.inter,
                    "intra": r.point.intra,
                    "median": r.median,
                    "spread": r.spread,
                    "samples": r.samples,
                })
            })
        })
        .collect();
    let settings: Vec<serde_json::Value> = report
        .settings
        .iter()
        .map(|search| {
            let live = &search.report;
            let best = live
                .best
                .map(|best| configuration(search.setting, best, live.point(best)));
            json!({
                "pool": search.setting.pool.as_str(),
                "spin": search.setting.spin_flag(),
                "best": best,
                "window_ms": live.window.as_secs_f64() * 1e3,
                "basis": live.basis,
                "elapsed_s": live.elapsed.as_secs_f64(),
            })
        })
        .collect();
    let finalists: Vec<serde_json::Value> = report
        .finalists
        .iter()
        .map(|f| {
            let mut value = configuration(f.setting, f.result.point, Some(&f.result));
            value["samples"] = json!(f.result.samples);
            value
        })
        .collect();
    let paired: Vec<serde_json::Value> = report
        .paired
        .iter()
        .map(|(setting, paired)| {
            let mut value = json!(paired);
            value["pool"] = setting.pool.as_str().into();
            value["spin"] = setting.spin_flag().into();
            value
        })
        .collect();
    let skipped: Vec<serde_json::Value> = report
        .skipped
        .iter()
        .map(|s| json!({ "pool": s.pool.as_str(), "spin": s.spin_flag() }))
        .collect();
    json!({
        "objective": report.objective,
        "unit": json_unit(report.objective),
        "budget_s": report.budget.as_secs_f64(),
        "elapsed_s": report.elapsed.as_secs_f64(),
        "best": report.best.map(chosen),
        "default": chosen(report.default),
        "gain": report.gain.as_ref().map(gain_json),
        "paired": paired,
        "rounds": report.rounds,
        "round_window_ms": report.round_window.as_secs_f64() * 1e3,
        "points": points,
        "settings": settings,
        "finalists": finalists,
        "skipped": skipped,
        "outcome": outcome_json(&report.outcome),
    })
}
