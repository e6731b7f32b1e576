//! `ptc expand`: print the code `ptc_upstreams!` generates for a config.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `ptc expand`.
#[derive(clap::Args)]
pub struct ExpandArgs {
    /// The upstreams.json to expand (`schema_url`s are read from their vendored copies).
    config: PathBuf,
}

/// Runs `ptc expand`: exit 0 and the formatted code on stdout, or exit 1 and every problem on
/// stderr (the same problems the macro reports).
pub fn run(args: ExpandArgs) -> ExitCode {
    let expansion = match ptc_codegen::expansion::expand(&args.config) {
        Ok(expansion) => expansion,
        Err(diags) => {
            eprintln!("{}", ptc_plan::Diagnostics(diags));
            return ExitCode::FAILURE;
        }
    };
    match ptc_codegen::pretty(expansion.tokens) {
        Ok(code) => {
            print!("{code}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
