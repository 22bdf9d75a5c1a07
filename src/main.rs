//! The `enginetop` binary: parses the command line and hands off to the library.
#![forbid(unsafe_code)]

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
