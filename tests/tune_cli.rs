//! `enginetop tune`: its help (a golden), its JSON's shape on a short search, and its refusals.
mod common;
use common::cli::{command, text};

fn enginetop(args: &[&str]) -> std::process::Output {
    command()
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the enginetop binary starts")
}

#[test]
fn tune_help() {
    let help = enginetop(&["tune", "--help"]);
    assert!(help.status.success());
    insta::assert_snapshot!(text(&help.stdout));
}

/// A short search on a small workload: the JSON holds the best, the default, the gain and
/// every point with its configuration, median, spread and samples; the flags that reproduce
/// it keep the `--spin` it ran with.
#[test]
fn the_json_summary_has_best_default_gain_and_points() {
    let out = enginetop(&[
        "tune",
        "--workload",
        "tests/data/tune/independent_ops.toml",
        "--set",
        "ops=8",
        "--set",
        "us=500",
        "--budget",
        "6",
        "--max-threads",
        "2",
        "--spin",
        "off",
        "--summary",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (best, default) = (&json["best"], &json["default"]);
    for point in [best, default] {
        assert!(point["inter"].as_u64().unwrap() <= 2, "{json:#}");
        assert!(point["intra"].as_u64().unwrap() <= 2, "{json:#}");
        assert!(point["median"].as_f64().unwrap() > 0.0, "{json:#}");
    }
    assert!(json["gain"]["ratio"].as_f64().unwrap() > 0.0);
    assert!(json["gain"]["spread"].as_f64().unwrap() >= 0.0);
    let points = json["points"].as_array().unwrap();
    assert!(!points.is_empty());
    for point in points {
        let samples = point["samples"].as_array().unwrap();
        assert!(!samples.is_empty(), "{point}");
        for key in ["inter", "intra", "median", "spread"] {
            assert!(point[key].is_number(), "{key}: {point}");
        }
    }
    let flags = json["flags"].as_str().unwrap();
    let inter = best["inter"].as_u64().unwrap();
    let intra = best["intra"].as_u64().unwrap();
    assert!(
        flags.ends_with(&format!("--inter {inter} --intra {intra} --spin off")),
        "{flags}"
    );
    assert_eq!(json["outcome"]["ended"], "finished");
}

#[test]
fn what_cannot_be_searched_is_refused_with_the_fix() {
    for (args, message) in [
        (
            &["--space", "inter,spin"][..],
            "`spin` cannot be searched live: whether idle workers spin is fixed when a pool's \
             workers start",
        ),
        (
            &["--space", "pool"][..],
            "`pool` cannot be searched live: the pool kind is fixed when the run builds its pools",
        ),
        (&["--budget", "1"][..], "give --budget"),
        (
            &["--engine", "naive"][..],
            "the naive engine has no inter-op pool to search: use --space intra",
        ),
    ] {
        let mut all = vec!["tune", "--workload", "chain"];
        all.extend_from_slice(args);
        let out = enginetop(&all);
        assert!(!out.status.success(), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}
