//! Running the `enginetop` binary from the integration tests.
use std::process::{Command, Output};

/// The `enginetop` binary cargo built for these tests, as a command to configure.
pub fn command() -> Command {
    Command::new(env!("CARGO_BIN_EXE_enginetop"))
}

/// Runs the binary with `args` and returns its output.
pub fn run(args: &[&str]) -> Output {
    command()
        .args(args)
        .output()
        .expect("the enginetop binary starts")
}

/// A process's output as text (lossy UTF-8).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
