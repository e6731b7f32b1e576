//! `ptc eval`: ptc-app's `eval` (the command a deployment binary has too) over the upstreams of
//! `--config`, or over none.

use std::path::PathBuf;
use std::process::ExitCode;

use ptc_app::PlanSource;
use ptc_plan::{Plan, Secrets};

/// Arguments of `ptc eval`.
#[derive(clap::Args)]
#[command(
    mut_arg("metrics", |a| a.requires("config")),
    after_help = "\
Examples:
  ptc eval -e '(->> [3 1 2] (sort) (map inc))'
  echo '(+ 1 2)' | ptc eval -
  ptc eval --json --context data.json -e '(count data/items)'
  ptc eval --config fixtures/observatory/upstreams.json -e '(doc (quote observatory/costs))'

With --json, stdout holds the JSON result only; what the program prints goes to stderr.

Exit codes:
  0  the result is on stdout
  1  the program failed; `reason: message` is on stderr
  2  bad usage, the program or context file cannot be read, or the config is invalid or
     an upstream cannot start"
)]
pub struct EvalCmd {
    /// An upstreams.json: the program may call its upstreams with `tool/call` and discover them
    /// (without it, the program runs with no upstreams).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    args: ptc_app::EvalArgs,
}

/// Runs `ptc eval`.
pub fn run(cmd: EvalCmd) -> ExitCode {
    let source = match cmd.config {
        Some(path) => PlanSource::Config(path),
        None => PlanSource::Compiled(Box::new(|| {
            let plan = Plan::default();
            Ok((plan, Secrets::default()))
        })),
    };
    ptc_app::eval("ptc", source, cmd.args)
}
