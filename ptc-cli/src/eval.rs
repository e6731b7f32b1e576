//! `ptc eval`: evaluate a PTC-Lisp program.

use std::process::ExitCode;

/// Arguments of `ptc eval`.
#[derive(clap::Args)]
pub struct EvalArgs {}

/// Runs `ptc eval`.
pub fn run(_args: EvalArgs) -> ExitCode {
    eprintln!("ptc eval is not implemented yet");
    ExitCode::FAILURE
}
