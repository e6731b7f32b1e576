//! `ptc expand`: print the code `ptc_upstreams!` generates for a config.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `ptc expand`.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  ptc expand fixtures/observatory/upstreams.json
  ptc expand upstreams.json > expanded.rs
  ptc expand fixtures/observatory/upstreams.json --typed observatory/get-trace,observatory/costs

Exit codes:
  0  the generated code is on stdout
  1  every problem found is on stderr, exactly as the ptc_upstreams! build reports it
  2  bad usage")]
pub struct ExpandArgs {
    /// The upstreams.json to expand (`schema_url`s are read from their vendored copies).
    config: PathBuf,
    /// Generate typed code only for these tools (server/tool, comma-separated), as
    /// `ptc_upstreams!("...", typed = [...])` does.
    #[arg(long, value_name = "TOOLS", value_delimiter = ',')]
    typed: Vec<String>,
}

/// Runs `ptc expand`: exit 0 and the formatted code on stdout, or exit 1 and every problem on
/// stderr (the same problems the macro reports).
pub fn run(args: ExpandArgs) -> ExitCode {
    let typed: std::collections::BTreeSet<String> = args.typed.into_iter().collect();
    let typed = (!typed.is_empty()).then_some(&typed);
    let expansion = match ptc_codegen::expansion::expand_typed(&args.config, typed) {
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
