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
        "8",
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
    // The gain is the pick's paired figure against the default: never slower beyond its
    // paired spread; the default itself has no pairs.
    let (gain, pairs) = (&json["gain"], json["gain"]["pairs"].as_u64().unwrap());
    if best["inter"] == default["inter"] && best["intra"] == default["intra"] {
        assert_eq!(pairs, 0, "{json:#}");
    } else {
        assert!(pairs >= 3, "{json:#}");
        let (ratio, spread) = (
            gain["ratio"].as_f64().unwrap(),
            gain["spread"].as_f64().unwrap(),
        );
        assert!(ratio + spread >= 1.0, "{json:#}");
    }
    for paired in json["paired"].as_array().unwrap() {
        assert!(["faster", "tie", "slower", "unconfirmed"]
            .contains(&paired["verdict"].as_str().unwrap()));
        assert!(!paired["ratios"].as_array().unwrap().is_empty(), "{paired}");
    }
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
            &["--space", "inter,threads"][..],
            "unknown dimension `threads` in --space: use inter, intra, spin, pool",
        ),
        (&["--space", ","][..], "--space names no dimension"),
        (&["--budget", "1"][..], "give --budget"),
        (
            &["--space", "inter,intra,spin,pool", "--budget", "20"][..],
            "give --budget",
        ),
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

/// `--space pool`: one run per pool kind; the JSON's best and default name their pool and
/// spin, every point and finalist its setting, every run its checksum (all equal per
/// iteration count is the library test's job), and the flags reproduce the pick with the
/// run's real `--pool` and `--spin` flags.
#[test]
fn the_json_summary_of_a_pool_search_names_the_setting() {
    let out = enginetop(&[
        "tune",
        "--workload",
        "tests/data/tune/independent_ops.toml",
        "--set",
        "ops=8",
        "--set",
        "us=500",
        "--space",
        "inter,pool",
        "--budget",
        "10",
        "--max-threads",
        "2",
        "--summary",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pools = ["simple", "eigen", "chase-lev"];
    for key in ["best", "default"] {
        let point = &json[key];
        assert!(pools.contains(&point["pool"].as_str().unwrap()), "{json:#}");
        assert!(["on", "off"].contains(&point["spin"].as_str().unwrap()));
        assert!(point["inter"].as_u64().unwrap() <= 2, "{json:#}");
        assert!(point["median"].as_f64().unwrap() > 0.0, "{json:#}");
    }
    assert_eq!(
        (&json["default"]["pool"], &json["default"]["spin"]),
        (&"eigen".into(), &"on".into())
    );
    let settings: Vec<&str> = json["settings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["pool"].as_str().unwrap())
        .collect();
    assert_eq!(
        settings,
        ["eigen", "simple", "chase-lev"],
        "the run's own pool first"
    );
    for point in json["points"].as_array().unwrap() {
        assert!(pools.contains(&point["pool"].as_str().unwrap()), "{point}");
        for key in ["inter", "intra", "median", "spread"] {
            assert!(point[key].is_number(), "{key}: {point}");
        }
    }
    assert!(json["rounds"].is_u64());
    let rounds = json["rounds"].as_u64().unwrap() as usize;
    for finalist in json["finalists"].as_array().unwrap() {
        assert!(
            finalist["samples"].as_array().unwrap().len() >= rounds,
            "{json:#}"
        );
    }
    let runs = json["runs"].as_array().unwrap();
    assert!(runs.len() >= 3, "{json:#}");
    assert!(
        runs.iter().all(|run| run["checksum"].is_string()),
        "{json:#}"
    );
    let best = &json["best"];
    let flags = json["flags"].as_str().unwrap();
    assert!(
        flags.ends_with(&format!(
            "--inter {} --intra {} --pool {} --spin {}",
            best["inter"],
            best["intra"],
            best["pool"].as_str().unwrap(),
            best["spin"].as_str().unwrap()
        )),
        "{flags}"
    );
    assert_eq!(json["outcome"]["ended"], "finished");
}

/// The table for people: one surface per setting, then the rounds, the verdict, the flags.
#[test]
fn the_table_of_a_spin_search_shows_one_surface_per_setting() {
    let out = enginetop(&[
        "tune",
        "--workload",
        "tests/data/tune/independent_ops.toml",
        "--set",
        "ops=8",
        "--set",
        "us=500",
        "--space",
        "spin",
        "--budget",
        "6",
        "--max-threads",
        "2",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for line in [
        "one run per setting, searched live",
        "\npool eigen spin on: best inter",
        "\npool eigen spin off: best inter",
        "best:    pool eigen spin",
        "default: pool eigen spin on, inter 2 intra 2",
        "reproduce: enginetop --workload tests/data/tune/independent_ops.toml --set ops=8 \
         --set us=500 --inter",
    ] {
        assert!(stdout.contains(line), "{line:?} in:\n{stdout}");
    }
    assert!(stdout.contains(" --pool eigen --spin o"), "{stdout}");
}
