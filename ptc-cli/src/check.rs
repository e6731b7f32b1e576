//! `ptc check`: validate a config and print the compiled catalog.

use std::process::ExitCode;

/// Arguments of `ptc check`.
#[derive(clap::Args)]
pub struct CheckArgs {}

/// Runs `ptc check`.
pub fn run(_args: CheckArgs) -> ExitCode {
    eprintln!("ptc check is not implemented yet");
    ExitCode::FAILURE
}
