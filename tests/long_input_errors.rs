//! Errors that quote a user's text cut a long one: a 900 KB name shows as its first 200
//! characters, an ellipsis and its length, not in full.

use enginetop::engine::EngineKind;
use enginetop::pool::PoolKind;
use enginetop::workload::{load_str, Overrides};

const LONG: usize = 900_000;

/// The message quotes the head of the text, says how long it was, and stays short.
fn assert_cut(message: &str) {
    assert!(
        message.contains(&format!("… ({LONG} characters)")),
        "says it was cut, and the length: {}",
        &message[..message.len().min(400)]
    );
    assert!(message.len() < 1_000, "{} bytes", message.len());
}

#[test]
fn a_workload_name_of_900_kb_is_cut_in_the_error() {
    let name = "t".repeat(LONG);
    let text = format!("description = \"long\"\ntensor = [{{ shape = [4], name = \"{name}\" }}]\n");
    let error = load_str(&text, "long.toml", &Overrides::default()).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("longer than 200 characters"),
        "{message:.300}"
    );
    assert_cut(&message);
}

#[test]
fn unknown_engine_and_pool_names_are_cut() {
    let name = "e".repeat(LONG);
    assert_cut(&name.parse::<EngineKind>().unwrap_err().to_string());
    assert_cut(&name.parse::<PoolKind>().unwrap_err().to_string());
}

#[test]
fn a_long_environment_value_is_cut_in_the_config_error() {
    let value = "p".repeat(LONG);
    let lookup = |name: &str| (name == "ENGINETOP_POOL").then(|| value.clone());
    let error = enginetop::config::RuntimeConfig::from_env_with(lookup).unwrap_err();
    assert_cut(&error.to_string());
}
