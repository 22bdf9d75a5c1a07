//! The `enginetop` binary: the command line lives in the library's `cli` module.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    enginetop::cli::main()
}
