//! End-to-end checks of `enginetop devices` and `--gpus` / `ENGINETOP_GPUS`, through the
//! binary.
mod common;

use std::process::Output;

use common::cli::text;
use serde_json::Value;

fn enginetop(args: &[&str], gpus_env: Option<&str>) -> Output {
    let mut command = common::cli::command();
    command.args(args).env_remove("ENGINETOP_GPUS");
    if let Some(value) = gpus_env {
        command.env("ENGINETOP_GPUS", value);
    }
    command.output().expect("the enginetop binary starts")
}

fn json_report(args: &[&str], gpus_env: Option<&str>) -> Value {
    let output = enginetop(args, gpus_env);
    assert!(output.status.success(), "stderr: {}", text(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("one JSON object")
}

#[test]
fn devices_json_lists_cpu_gpus_and_what_auto_picks() {
    let report = json_report(&["devices", "--json"], None);
    assert!(report["cpu"]["schedulable_cores"].as_u64().unwrap() >= 1);
    assert!(report["cpu"]["inter_op_threads"].as_u64().unwrap() >= 1);
    assert_eq!(report["sim"]["simulated"], true);
    let auto = &report["auto"];
    if report["cuda"]["usable"] == true {
        assert_eq!(auto["backend"], "cuda");
        assert!(auto["notice"].is_null());
    } else {
        // No usable GPU here: auto falls back to one simulated GPU and says why.
        let problem = report["cuda"]["problem"].as_str().unwrap();
        assert_eq!(auto["backend"], "sim");
        assert_eq!(auto["devices"], 1);
        assert_eq!(
            auto["notice"].as_str().unwrap(),
            format!("{problem}; using a simulated GPU")
        );
    }
    assert_eq!(report["configured"]["selection"], "auto");
}

#[test]
fn devices_text_says_what_was_found_or_why_not() {
    let output = enginetop(&["devices"], None);
    assert!(output.status.success(), "stderr: {}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.starts_with("CPU\n  schedulable cores"), "{stdout}");
    let cuda_line = stdout
        .lines()
        .find(|line| line.starts_with("  cuda   "))
        .expect("a cuda line");
    assert!(
        cuda_line.starts_with("  cuda   none found: ") || cuda_line.starts_with("  cuda   gpu0: "),
        "{cuda_line}"
    );
    assert!(stdout.contains("  sim    --gpus sim:N gives N x simulated H100-class GPU (model: "));
    assert!(stdout.contains("\nauto picks       "), "{stdout}");
}

#[test]
fn the_flag_beats_the_environment() {
    let report = json_report(&["devices", "--json", "--gpus", "sim:3"], Some("none"));
    assert_eq!(report["configured"]["backend"], "sim");
    assert_eq!(report["configured"]["devices"], 3);
    let report = json_report(&["devices", "--json"], Some("none"));
    assert!(report["configured"]["backend"].is_null());
}

#[test]
fn bad_selections_fail_naming_the_forms() {
    let output = enginetop(&["devices", "--gpus", "sim:0"], None);
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(
            "\"sim:0\" is not a GPU selection: expected none, auto, cuda or sim:N with N from 1 \
             to 16 (sim:0 asks for no GPUs: use none)"
        ),
        "{stderr}"
    );

    let output = enginetop(&["devices"], Some("gpu:1"));
    assert!(!output.status.success());
    assert_eq!(
        text(&output.stderr).trim(),
        "error: ENGINETOP_GPUS=\"gpu:1\" is not a GPU selection: expected none, auto, cuda or \
         sim:N with N from 1 to 16 (not one of these); unset it or set e.g. ENGINETOP_GPUS=sim:1"
    );
}
