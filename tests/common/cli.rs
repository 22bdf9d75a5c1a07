//! Running the `enginetop` binary from the integration tests.
use std::path::{Path, PathBuf};
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

/// A fresh directory for one test's files: `enginetop-{suite}-{name}-{pid}` under the
/// system's temporary directory, emptied if a previous run left it.
pub fn scratch(suite: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("enginetop-{suite}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the binary with `args` in `dir`, its caches there too (the GEMM peak), and returns
/// its output.
pub fn run_in(args: &[&str], dir: &Path) -> Output {
    command()
        .args(args)
        .current_dir(dir)
        .env("XDG_CACHE_HOME", dir)
        .output()
        .expect("the enginetop binary starts")
}
